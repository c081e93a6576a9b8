"""`ddpkit bench` on a 2-node sim shaped to 1 Gbit, and `ddpkit plan`'s prediction checked against it.

Brings up its own sim cluster (``--name``/``--subnet``, default ``dkbsim`` on 10.213.77.0/24; always
torn down), runs ``ddpkit bench`` (raw TCP + collective sweep + scaling) on both nodes, feeds the
results file to ``ddpkit plan --from-bench``, and prints, each as a ratio measured in this one run:

* raw TCP (slowest pair, best stream count) / the shaped rate          target 0.9 .. 1.1
* busbw / raw TCP, per collective and size                            (the headline of bench)
* measured efficiency per setting, and the recommendation             target >= 0.75 on this setup
* plan's predicted efficiency / measured efficiency, per setting       target 0.8 .. 1.2

Root only (network namespaces). Every rank gets one thread (``OMP_NUM_THREADS=1``): the two
simulated nodes share this machine's cores, and with one thread per rank each node has a core of
its own, as on separate machines. Short mode with --quick or CI=true (small model, few steps and
sizes; about 2 minutes here); the full mode takes 10+ minutes on a 2-core box.

    sudo python benchmarks/bench_sim.py [--quick] [--check] [--keep DIR]

--check exits 1 when a target is missed (off by default: a shared box is noisy, ±20%).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddpkit.sim import SimSpec, down, node_argv, up

RATE = "1gbit"
SHAPED_BYTES_PER_S = 1e9 / 8
FULL_SETTINGS = "none,bf16,fp16,powersgd:1,powersgd:2,powersgd:4,accumulate:4,bf16+accumulate:4"
TCP_BAND, PLAN_BAND, EFFICIENCY_TARGET = (0.9, 1.1), (0.8, 1.2), 0.75


def bench_argv(node: int, master: str, run_dir: Path, quick: bool) -> list[str]:
    argv = [sys.executable, "-m", "ddpkit", "bench", "--json", "--nnodes", "2", "--node-rank",
            str(node), "--master-addr", master, "--master-port", "29500", "--run-dir", str(run_dir),
            "--env", "OMP_NUM_THREADS=1"]
    if quick:
        return argv + ["--quick"]
    return argv + ["--settings", FULL_SETTINGS, "-b", "1K", "-e", "64M", "-f", "4"]


def run_on_sim(name: str, subnet: str, work: Path, argv_of: Callable[[int, str, Path], list[str]],
               timeout: float) -> tuple[str, tuple[int | None, int | None], float]:
    """``argv_of(node, master address, run dir)`` on both nodes of a fresh 2-node sim shaped to
    RATE (always torn down; stderr in ``work``): node 0's stdout, both exit codes, seconds."""
    down(name)  # a cluster of this name left by an earlier, killed run
    cluster = up(SimSpec(nodes=2, name=name, subnet=subnet, rate=RATE))
    procs: dict[int, subprocess.Popen[str]] = {}
    logs = []
    try:
        master = cluster.nodes[0].private_address
        started = time.monotonic()
        for node in (1, 0):
            logs.append(open(work / f"node{node}.log", "w"))  # noqa: SIM115 - closed below
            procs[node] = subprocess.Popen(
                node_argv(cluster, node, argv_of(node, master, work / f"node{node}")),
                stdout=subprocess.PIPE, stderr=logs[-1], text=True, start_new_session=True)
        out, _ = procs[0].communicate(timeout=timeout)
        procs[1].communicate(timeout=120)
        return out, (procs[0].returncode, procs[1].returncode), time.monotonic() - started
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        for log in logs:
            log.close()
        report = down(name)
        if report.processes_killed:
            print(f"warning: teardown killed leftover processes {report.processes_killed}",
                  file=sys.stderr)


def run_bench(name: str, subnet: str, work: Path, quick: bool) -> tuple[dict[str, Any], float]:
    out, codes, elapsed = run_on_sim(
        name, subnet, work, lambda node, master, run_dir: bench_argv(node, master, run_dir, quick),
        400 if quick else 3600)
    if codes != (0, 0):
        raise SystemExit(f"bench failed (node 0: exit {codes[0]}, node 1: exit {codes[1]}); logs "
                         f"in {work}")
    return json.loads(out), elapsed


def plan_for(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    settings = ",".join(r["setting"] for r in doc["scaling"])
    argv = [sys.executable, "-m", "ddpkit", "plan", "--from-bench", str(path), "--json",
            "--settings", settings, "--hidden", str(doc["model"]["width"])]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise SystemExit(f"ddpkit plan failed: {proc.stderr}")
    return dict(json.loads(proc.stdout))


def _in(value: float | None, band: tuple[float, float]) -> str:
    if value is None:
        return "n/a"
    return "ok" if band[0] <= value <= band[1] else "MISSED"


def report(doc: dict[str, Any], plan: dict[str, Any], elapsed: float, quick: bool) -> bool:
    ok = True
    model, cluster = doc["model"], doc["cluster"]
    print(f"ddpkit bench on a 2-node sim shaped to {RATE} ({'quick' if quick else 'full'} mode, "
          f"{elapsed:.0f} s): {cluster['backend']} on {cluster['device']}, "
          f"{model['params'] / 1e6:.1f}M-param MLP ({model['depth']}x{model['width']}), batch "
          f"{model['batch_per_rank']} per rank")
    print("\nraw TCP vs the shaped rate (target 0.9 .. 1.1)")
    for pair in doc["tcp"]["pairs"]:
        ratio = (pair["bytes_per_s"] or 0) / SHAPED_BYTES_PER_S
        print(f"  node {pair['src']} -> node {pair['dst']}, {pair['streams']} stream(s): "
              f"{(pair['bytes_per_s'] or 0) * 8 / 1e9:.3f} Gbit/s = {ratio:.3f} x shaped")
    wire = doc["tcp"]["wire_bytes_per_s"]
    wire_ratio = wire / SHAPED_BYTES_PER_S
    verdict = _in(wire_ratio, TCP_BAND)
    ok &= verdict == "ok"
    print(f"  wire (slowest pair, best stream count): {wire_ratio:.3f} x shaped   {verdict}")
    print("\nbusbw / raw TCP per size")
    for entry in doc["collectives"]["ops"]:
        cells = [f"{r['bytes'] / 2**20:g}M:{r['busbw_over_tcp']:.2f}" if r["bytes"] >= 2**20 else
                 f"{r['bytes'] / 2**10:g}K:{r['busbw_over_tcp']:.2f}" for r in entry["results"]]
        print(f"  {entry['op']:<15} {' '.join(cells)}")
    print(f"  inter-node all_reduce busbw at the largest size: "
          f"{doc['inter_node']['busbw_over_tcp']:.3f} x raw TCP")
    predicted = {s["setting"]: s["efficiency"] for s in plan["settings"]}
    print(f"\nefficiency per setting (1-node step {doc['single_node']['step_s'] * 1e3:.0f} ms, "
          "median reference)")
    print(f"  {'setting':<20} {'1-node':>8} {'2-node':>8} {'measured':>9} {'plan':>6} "
          f"{'plan/measured':>14}   reference drift")
    for row in doc["scaling"]:
        if not row["ok"]:
            print(f"  {row['setting']:<20} FAILED: {row.get('error')}")
            continue
        guess = predicted.get(row["setting"])
        ratio = guess / row["efficiency"] if guess else None
        verdict = _in(ratio, PLAN_BAND)
        ok &= verdict == "ok"
        drift = row.get("reference_spread")
        print(f"  {row['setting']:<20} {row['one_node_step_s'] * 1e3:6.0f}ms "
              f"{row['step_s'] * 1e3:6.0f}ms {row['efficiency']:9.2f} {guess or 0:6.2f} "
              f"{ratio or 0:14.2f} {verdict:<6} {'-' if drift is None else f'{drift:.0%}'}"
              + (" NOISY" if row.get("noisy") else ""))
    rec = doc["recommendation"]
    best = max((r["efficiency"] for r in doc["scaling"] if r["ok"] and not r.get("noisy")),
               default=0.0)
    target = "ok" if best >= EFFICIENCY_TARGET else "MISSED"
    ok &= target == "ok" or quick
    noisy = [r["setting"] for r in doc["scaling"] if r.get("noisy")]
    if noisy:
        print(f"\nnoisy (the machine's speed changed during the job; not counted): "
              f"{', '.join(noisy)}")
    print(f"\nbest measured efficiency {best:.2f} (target >= {EFFICIENCY_TARGET} on this setup"
          f"{', not expected of the quick model' if quick else ''}): {target}")
    print(f"bench: {rec['text']}")
    print(f"plan:  {plan['verdict']['text']}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short mode (also when CI=true)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--name", default="dkbsim", help="sim cluster name (default dkbsim)")
    parser.add_argument("--subnet", default="10.213.77.0/24", help="its private subnet")
    parser.add_argument("--keep", type=Path, default=None, help="keep logs and results in DIR")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_sim.py needs root (network namespaces)", file=sys.stderr)
        return 2
    quick = args.quick or os.environ.get("CI", "").lower() == "true"
    with tempfile.TemporaryDirectory(prefix="ddpkit-bench-sim-") as scratch:
        work = args.keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        doc, elapsed = run_bench(args.name, args.subnet, work, quick)
        path = work / "bench.json"
        path.write_text(json.dumps(doc, indent=2))
        ok = report(doc, plan_for(doc, path), elapsed, quick)
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    raise SystemExit(main())
