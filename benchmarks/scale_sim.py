"""A 32-node rehearsal in one command each, measured (issue 33): what grows with N.

Brings up ``ddpkit sim up N --ssh`` (default 32 nodes, 1 rank per node, CPU/Gloo; its own name and
subnet, always torn down) and runs, each as a user would, from the host:

1. ``ddpkit test --quick --hostfile H --ssh-config C``                 every check passes
2. ``ddpkit doctor --hostfile H --ssh-config C``                       reachability, version diff
3. ``ddpkit launch --hostfile H --ssh-config C train.py``              a small DDP script
4. the same with node ``--fail-node`` (default 27) raising             the master names it
5. the join-token mode: ``ddpkit launch --nnodes N --token-file F`` in node 0, ``ddpkit join``
   in the other N-1 nodes

For each: wall time, ddpkit's own peak RSS on the machine that runs the command (``ru_maxrss`` of
the ddpkit process, from ``wait4``: the ssh controller for 1-4, node 0's launcher for 5), the peak
total RSS of every process of the job (the command, its ssh clients, every process inside the
nodes; shared pages counted once per process, so an upper bound), and the widest output line. Then
``sim down`` and a check that nothing is left (namespace, runtime dir with the keys, sshd).

    sudo python benchmarks/scale_sim.py [--nodes 32] [--quick] [--out results.json]

``--quick`` (or CI=true): 4 nodes, the failing node is the last. Root only. The whole run at 32 nodes
takes about 20 minutes on the 2-core box (32 torch imports per step).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from ddpkit.cli.output.width import display_width
from ddpkit.errors import ExitCode
from ddpkit.sim import host, inspect, node_argv
from ddpkit.sim.topology import NETNS_DIR, owned_namespace_pattern

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
from multinode import error_message  # noqa: E402 - the tests' reading of an error paragraph

TRAIN = textwrap.dedent("""\
    import datetime, os, sys, torch, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    fail = int(os.environ.get("SCALE_FAIL_RANK", sys.argv[1] if len(sys.argv) > 1 else "-1"))
    for step in range(5):
        if dist.get_rank() == fail and step == 2:
            raise ValueError(f"batch {step} has 3 labels, expected 4")
        opt.zero_grad()
        model(torch.ones(4, 64)).sum().backward()
        opt.step()
    dist.barrier()
    dist.destroy_process_group()
""")
RAISE_LINE = 8


@dataclass
class Step:
    name: str
    command: str
    wall_s: float = 0.0
    exit_code: int | None = None
    ok: bool = False
    ddpkit_peak_rss_mib: float = 0.0
    job_peak_rss_mib: float = 0.0
    widest_line: int = 0
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def ddpkit(*args: str) -> list[str]:
    return [sys.executable, "-m", "ddpkit", *args]


def _namespace_inodes(name: str) -> set[int]:
    return {inode for ns in host.namespaces_matching(owned_namespace_pattern(name))
            if (inode := host.namespace_inode(f"{NETNS_DIR}/{ns}")) is not None}


def _job_rss(name: str, roots: Sequence[int]) -> int:
    """RSS of every process inside the cluster's nodes plus the given process trees, in bytes."""
    pids = set(host.processes_in_namespaces(_namespace_inodes(name)))
    for root in roots:
        try:
            proc = psutil.Process(root)
            pids |= {proc.pid, *(child.pid for child in proc.children(recursive=True))}
        except psutil.Error:
            continue
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            continue
    return total


def run_measured(name: str, argvs: Sequence[list[str]], work: Path, label: str,
                 timeout: float) -> tuple[list[int], float, float, float, list[str]]:
    """Start every argv (the first is the ddpkit process whose peak RSS counts), sample the job's
    total RSS every second until all end; (exit codes, wall s, ddpkit peak MiB, job peak MiB,
    [stdout+stderr of each])."""
    started = time.monotonic()
    procs, files = [], []
    for index, argv in enumerate(argvs):
        out = open(work / f"{label}.{index}.out", "w+")  # noqa: SIM115 - closed below
        err = open(work / f"{label}.{index}.err", "w+")  # noqa: SIM115
        files.append((out, err))
        procs.append(subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                      cwd=work, start_new_session=True))
    codes: dict[int, int] = {}
    first_rss = 0.0
    job_peak = 0
    last_sample = 0.0
    while len(codes) < len(procs):
        for index, proc in enumerate(procs):
            if index in codes:
                continue
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                codes[index] = os.waitstatus_to_exitcode(status)
                proc.returncode = codes[index]
                if index == 0:
                    first_rss = usage.ru_maxrss / 1024
        if time.monotonic() - last_sample > 1.0:
            last_sample = time.monotonic()
            job_peak = max(job_peak, _job_rss(name, [p.pid for i, p in enumerate(procs)
                                                     if i not in codes]))
        if time.monotonic() - started > timeout:
            for index, proc in enumerate(procs):
                if index not in codes:
                    os.killpg(proc.pid, 9)
            timeout = float("inf")
        time.sleep(0.1)
    texts = []
    for out, err in files:
        out.seek(0)
        err.seek(0)
        texts.append(out.read() + err.read())
        out.close()
        err.close()
    return ([codes[i] for i in range(len(procs))], time.monotonic() - started, first_rss,
            job_peak / 2**20, texts)


def widest(text: str) -> int:
    return max((display_width(line) for line in text.splitlines()), default=0)


def busy_nodes(name: str, sshd: dict[str, int]) -> dict[int, int]:
    counts = {i: n - (str(i) in sshd) for i, n in inspect(name).processes.items()}
    return {i: n for i, n in counts.items() if n > 0}


def wait_idle(name: str, sshd: dict[str, int], limit: float = 60) -> float | None:
    started = time.monotonic()
    while busy_nodes(name, sshd):
        if time.monotonic() - started > limit:
            return None
        time.sleep(0.2)
    return time.monotonic() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=None)
    parser.add_argument("--fail-node", type=int, default=None)
    parser.add_argument("--quick", action="store_true", default=os.environ.get("CI") == "true")
    parser.add_argument("--name", default="dkscal")
    parser.add_argument("--subnet", default="10.213.33.0/24")
    parser.add_argument("--out", default=None, help="also write the results as JSON here")
    parser.add_argument("--keep", default=None, help="keep every step's output in this directory")
    parser.add_argument("--steps", default="test,doctor,launch,fail,join")
    args = parser.parse_args(argv)
    nodes = args.nodes or (4 if args.quick else 32)
    fail_node = args.fail_node if args.fail_node is not None else (27 if nodes > 27 else nodes - 1)
    wanted = set(args.steps.split(","))
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ddpkit-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "train.py").write_text(TRAIN)
    steps: list[Step] = []
    subprocess.run(ddpkit("sim", "down", "--name", args.name), capture_output=True, check=False)
    try:
        step = Step("sim up --ssh", f"ddpkit sim up {nodes} --ssh")
        codes, step.wall_s, step.ddpkit_peak_rss_mib, _, texts = run_measured(
            args.name, [ddpkit("sim", "up", str(nodes), "--ssh", "--name", args.name, "--subnet",
                               args.subnet, "--json")], work, "up", 300)
        step.exit_code, step.ok = codes[0], codes[0] == 0
        steps.append(step)
        progress(step)
        if not step.ok:
            print(texts[0][-3000:], file=sys.stderr)
            return 1
        doc = json.loads(texts[0][:texts[0].rindex("}") + 1])
        ssh = doc["ssh"]
        sshd = ssh["sshd"]
        flags = ["--hostfile", ssh["hostfile"], "--ssh-config", ssh["ssh_config"]]
        up_plus_test = step.wall_s

        if "test" in wanted:
            step = Step("test --hosts", "ddpkit test --quick --hostfile H --ssh-config C")
            codes, step.wall_s, step.ddpkit_peak_rss_mib, step.job_peak_rss_mib, texts = \
                run_measured(args.name, [ddpkit("test", "--quick", "--run-dir",
                                                 str(work / "runs-test"), *flags)], work, "test",
                             900)
            step.exit_code = codes[0]
            step.ok = codes[0] == 0 and f"{nodes} nodes × 1 rank: all checks passed" in texts[0]
            step.widest_line = widest(texts[0])
            step.note = next((line for line in texts[0].splitlines()
                              if "all checks passed" in line or "FAILED" in line), "")
            up_plus_test += step.wall_s
            step.extra["sim_up_plus_test_s"] = round(up_plus_test, 1)
            steps.append(step)
            progress(step)
            wait_idle(args.name, sshd)

        if "fail" in wanted:
            step = Step(f"launch, node {fail_node} raises",
                        f"ddpkit launch --hostfile H --ssh-config C train.py {fail_node}")
            codes, step.wall_s, step.ddpkit_peak_rss_mib, step.job_peak_rss_mib, texts = \
                run_measured(args.name, [ddpkit("launch", "--run-dir", str(work / "runs-fail"),
                                                *flags, "train.py", str(fail_node))], work,
                             "fail", 900)
            step.exit_code = codes[0]
            summary = error_message(texts[0])
            address = ssh_address(ssh["hostfile"], fail_node)
            step.ok = (codes[0] == ExitCode.JOB_FAILED and summary.startswith(
                f"error [job-failed]: node {fail_node} ({address}, rank {fail_node}")
                and f"ValueError: batch 2 has 3 labels, expected 4 (at train.py:{RAISE_LINE}"
                in summary)
            step.note = summary[:300]
            step.widest_line = widest(texts[0])
            idle = wait_idle(args.name, sshd)
            step.extra["nodes_idle_after_exit_s"] = None if idle is None else round(idle, 1)
            steps.append(step)
            progress(step)

        if "doctor" in wanted:
            step = Step("doctor --hosts", "ddpkit doctor --hostfile H --ssh-config C")
            codes, step.wall_s, step.ddpkit_peak_rss_mib, step.job_peak_rss_mib, texts = \
                run_measured(args.name, [ddpkit("doctor", "--timeout", "600", *flags)], work,
                             "doctor", 900)
            step.exit_code = codes[0]
            step.ok = codes[0] == 0 and "doctor: cluster ok" in texts[0]
            step.widest_line = widest(texts[0])
            probes = re.search(r"(\d+) probes[,:]", texts[0])
            step.extra["probes"] = int(probes.group(1)) if probes else None
            step.extra["sampled"] = "sampled" in texts[0]
            step.note = next((line.split("] ", 1)[-1] for line in texts[0].splitlines()
                              if "doctor: cluster" in line), "")
            steps.append(step)
            progress(step)
            wait_idle(args.name, sshd)

        if "launch" in wanted:
            step = Step("launch --hosts", "ddpkit launch --hostfile H --ssh-config C train.py")
            codes, step.wall_s, step.ddpkit_peak_rss_mib, step.job_peak_rss_mib, texts = \
                run_measured(args.name, [ddpkit("launch", "--run-dir", str(work / "runs-launch"),
                                                *flags, "train.py")], work, "launch", 900)
            step.exit_code, step.ok = codes[0], codes[0] == 0
            step.widest_line = widest(texts[0])
            steps.append(step)
            progress(step)
            wait_idle(args.name, sshd)

        if "join" in wanted:
            steps.append(join_step(args.name, doc, nodes, work))
            progress(steps[-1])
            wait_idle(args.name, sshd)
    finally:
        step = Step("sim down", f"ddpkit sim down --name {args.name}")
        codes, step.wall_s, _, _, texts = run_measured(
            args.name, [ddpkit("sim", "down", "--name", args.name, "--json")], work, "down", 300)
        step.exit_code = codes[0]
        left = leftovers(args.name)
        step.ok = codes[0] == 0 and not left
        step.note = "nothing left" if not left else "left: " + ", ".join(left)
        steps.append(step)
        report(steps, nodes, args.out)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if all(s.ok for s in steps) else 1


def ssh_address(hostfile: str, index: int) -> str:
    lines = [line.split()[0] for line in Path(hostfile).read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    return lines[index]


def join_step(name: str, doc: dict[str, Any], nodes: int, work: Path) -> Step:
    """Token mode: the master in node 0, ``ddpkit join`` in every other node (through
    ``sim exec``'s own argv, so each runs inside its node)."""
    from ddpkit.sim import SimSpec, build_cluster

    cluster = build_cluster(SimSpec.from_dict(doc["cluster"]["spec"]))
    step = Step(f"join token, {nodes - 1} workers",
                f"ddpkit launch --nnodes {nodes} --token-file F train.py; ddpkit join (x{nodes - 1})")
    token = work / "token"
    token.unlink(missing_ok=True)
    tools = host.find_tools({"ip", "nsenter"})
    master = tools.resolve(node_argv(cluster, 0, ddpkit(
        "launch", "--nnodes", str(nodes), "--join-timeout", "600", "--token-file", str(token),
        "--run-dir", str(work / "runs-join" / "node0"), "train.py")))
    # the workers wait for the token file inside a tiny shell loop, so every process starts now
    # and the measurement covers them all
    workers = [tools.resolve(node_argv(cluster, i, [
        "sh", "-c", f"while [ ! -s {token} ]; do sleep 0.2; done; exec \"$@\"", "join",
        *ddpkit("join", "--token-file", str(token), "--run-dir",
                str(work / "runs-join" / f"node{i}"))])) for i in range(1, nodes)]
    codes, step.wall_s, step.ddpkit_peak_rss_mib, step.job_peak_rss_mib, texts = run_measured(
        name, [master, *workers], work, "join", 900)
    step.exit_code = codes[0]
    step.ok = all(code == 0 for code in codes)
    step.widest_line = max(widest(text) for text in texts)
    step.extra["workers_failed"] = sum(code != 0 for code in codes[1:])
    return step


def leftovers(name: str) -> list[str]:
    found = [f"namespace {ns}" for ns in host.namespaces_matching(owned_namespace_pattern(name))]
    if os.path.exists(f"/run/ddpkit-sim/{name}"):
        found.append(f"/run/ddpkit-sim/{name}")
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if proc.info.get("name") == "sshd" and f"/run/ddpkit-sim/{name}/" in cmdline:
            found.append(f"sshd pid {proc.pid}")
    return found


def progress(step: Step) -> None:
    print(f"[scale_sim] {step.name}: {step.wall_s:.1f} s, ok={step.ok}, ddpkit "
          f"{step.ddpkit_peak_rss_mib:.0f} MiB, job {step.job_peak_rss_mib:.0f} MiB, widest "
          f"{step.widest_line}; {step.note[:200]} {json.dumps(step.extra)}", file=sys.stderr,
          flush=True)


def report(steps: Sequence[Step], nodes: int, out: str | None) -> None:
    print(f"# benchmarks/scale_sim.py: {nodes} nodes, 1 rank per node, CPU/Gloo, "
          f"{os.cpu_count()} cores")
    print("| step | wall s | ddpkit peak RSS MiB | job peak RSS MiB | widest line | ok |")
    print("|---|---:|---:|---:|---:|---|")
    for step in steps:
        job = f"{step.job_peak_rss_mib:.0f}" if step.job_peak_rss_mib else "-"
        rss = f"{step.ddpkit_peak_rss_mib:.0f}" if step.ddpkit_peak_rss_mib else "-"
        width = str(step.widest_line) if step.widest_line else "-"
        print(f"| {step.name} | {step.wall_s:.1f} | {rss} | {job} | {width} | "
              f"{'yes' if step.ok else 'NO'} |")
    for step in steps:
        if step.note or step.extra:
            print(f"- {step.name}: {step.note} {json.dumps(step.extra) if step.extra else ''}")
    if out:
        Path(out).write_text(json.dumps({"nodes": nodes, "steps": [asdict(s) for s in steps]},
                                        indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
