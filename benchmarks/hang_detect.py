"""Hang detection on a sim cluster: how fast ddpkit goes from a hang to the printed summary.

Brings up an N-node sim (``--nodes``, default 2 and 8 in turn; 1 rank per node; always torn
down), runs ``ddpkit launch --hang-timeout T --hang-action stop --json`` on every node with a
script whose last rank sleeps instead of calling all_reduce, and prints per node count:

* detection -> summary: the time from the verdict (no rank progressed for T) to the grouped
  summary being ready (py-spy dumps of every local rank, source lines, grouping); from each node's
  ``stack_reports[].dump_s``                                           target: < 2 s
* hang -> report: from the sleeping rank entering ``time.sleep`` to its node's
  ``stacks/summary.txt``; T plus up to one sample (1 s) plus the dump   target: < T + 15 s
* hang -> every node stopped: the whole job gone (--hang-action stop waits 5 s after the dump)

Root only (network namespaces). ``OMP_NUM_THREADS=1`` per rank: the nodes share this machine.

    sudo python benchmarks/hang_detect.py [--nodes 2,8] [--hang-timeout 10] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from ddpkit.sim import SimSpec, down, node_argv, up

SKIPPER = textwrap.dedent("""
    import datetime, pathlib, sys, time
    import torch, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=600))
    t = torch.ones(4)
    if dist.get_rank() == dist.get_world_size() - 1:
        pathlib.Path(sys.argv[1], "sleep-started").write_text(repr(time.time()))
        time.sleep(900)
    else:
        dist.all_reduce(t)
""")


def run(nodes: int, timeout: float, work: Path, name: str, subnet: str) -> dict[str, Any]:
    down(name)
    cluster = up(SimSpec(nodes=nodes, name=name, subnet=subnet))
    entry = work / "skipper.py"
    entry.write_text(SKIPPER)
    procs: list[subprocess.Popen[str]] = []
    try:
        master = cluster.nodes[0].private_address
        for node in range(nodes):
            argv = [sys.executable, "-m", "ddpkit", "launch", "--json", "--nnodes", str(nodes),
                    "--node-rank", str(node), "--master-addr", master, "--master-port", "29533",
                    "--run-dir", str(work / f"node{node}"), "--hang-timeout", f"{timeout:g}",
                    "--hang-action", "stop", "--env", "OMP_NUM_THREADS=1", "--rdzv-timeout",
                    "300", str(entry), str(work)]
            procs.append(subprocess.Popen(node_argv(cluster, node, argv), stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True,
                                          start_new_session=True))
        outputs = [p.communicate(timeout=timeout + 600) for p in procs]
        ended = time.time()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        report = down(name)
    slept = float((work / "sleep-started").read_text())
    dumps, latencies = [], []
    for node, (out, err) in enumerate(outputs):
        try:
            doc = json.loads(out[out.index("{"):])
            reports = doc["error"]["details"]["stack_reports"]
        except (ValueError, KeyError) as exc:
            raise SystemExit(f"node {node} gave no hang report ({exc}):\n{err[-3000:]}") from None
        dumps.append(reports[-1]["dump_s"])
        latencies.append((work / f"node{node}" / "stacks" / "summary.txt").stat().st_mtime - slept)
    odd = outputs[-1][1]
    named = f"rank {nodes - 1} is at skipper.py:8 `time.sleep(900)`" in odd  # its node's report
    return {"nodes": nodes, "dump_s": dumps, "hang_to_report_s": latencies,
            "hang_to_stopped_s": ended - slept, "named": named,
            "leftovers": list(report.processes_killed),
            "exit_codes": [p.returncode for p in procs]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="2,8")
    parser.add_argument("--hang-timeout", type=float, default=10.0)
    parser.add_argument("--keep", default=None)
    parser.add_argument("--name", default="dkhang")
    parser.add_argument("--subnet", default="10.213.78.0/24")
    args = parser.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ddpkit-hang-"))
    ok = True
    for count in (int(n) for n in args.nodes.split(",")):
        work = root / f"{count}nodes"
        work.mkdir(parents=True, exist_ok=True)
        result = run(count, args.hang_timeout, work, args.name, args.subnet)
        dump = result["dump_s"]
        lat = result["hang_to_report_s"]
        good = max(dump) < 2 and max(lat) < args.hang_timeout + 15 and result["named"] \
            and not result["leftovers"]
        ok &= good
        print(f"{count} nodes x 1 rank, --hang-timeout {args.hang_timeout:g}: "
              f"detection -> summary median {statistics.median(dump) * 1e3:.0f} ms, max "
              f"{max(dump) * 1e3:.0f} ms; hang -> report median {statistics.median(lat):.1f} s, "
              f"max {max(lat):.1f} s; hang -> every node stopped {result['hang_to_stopped_s']:.1f} s;"
              f" odd rank named: {result['named']}; leftovers: {result['leftovers'] or 'none'}; "
              f"exit codes {sorted(set(result['exit_codes']))}  {'ok' if good else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
