"""What `ddpkit launch` costs over plain torchrun, on a tiny 2-node job on a sim cluster.

The job: init a Gloo process group, one all_reduce, destroy, exit. Each round starts it on both
nodes of a 2-node sim (network namespaces, private network on eth1) twice, in alternating order:
once with plain ``torchrun`` given the right interface variable by hand (what a user who already
knows the answer types), once with ``ddpkit launch`` (which finds the interface itself, checks the
master, and summarises). The wall time from starting both nodes to both exiting is recorded, and
the script prints the medians and their ratio, measured in this one run.

Both launchers run with Python's bytecode cache on, as an installed package has it (pip compiles
a package when it installs it): where PYTHONDONTWRITEBYTECODE is set (this workplace sets it), an
editable checkout of ddpkit would otherwise compile its ~60 modules from source at every start,
about 0.13 s of CPU per node that no user pays. One untimed round of each launcher fills the cache
first. ``--bytecode-as-is`` keeps the caller's setting instead.

Where the time goes (issue 31's profile: rusage of every interpreter of both nodes through a
``sitecustomize`` hook, ``-X importtime``, cProfile with a CPU clock, strace, on the sim):
ddpkit's launcher costs about 0.14 CPU-s per node to start (a third of it making ~67 dataclasses,
10 ms compiling regexes; no torch, doctor engine or cryptography: tests/unit/
test_launch_startup_weight.py) and 8 to 10 ms of CPU per second while the ranks run (the hang
watcher's samples of the process table, the rank-output follower, the descendant scan; Popen's
polling wait was 2 ms/s more until it waited on a pidfd). Against that, torchrun itself ends
sooner through ddpkit: an interpreter that imported torch spends 0.3 to 0.5 CPU-s (up to 2 s and
more of wall on a loaded box) tearing its modules down after its last line, which torchrun run
through ``ddpkit.launch.torchrun.agent`` skips once it has succeeded (launch/torchrun/agent.py).

Target (issue 31): ratio <= 1.05. Root only. Short mode with --quick or CI=true (3 rounds).

    sudo python benchmarks/launch_overhead.py [--rounds N] [--quick] [--check] [--keep DIR]
                                              [--bytecode-as-is]

--check exits 1 when the ratio is above the target (off by default: a shared box is noisy).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

from ddpkit.sim import SimSpec, down, node_argv, up

TARGET = 1.05  # issue 31 (issue 13 had 1.10)
# The job ends with os._exit: torch 2.13's Gloo can abort a process at interpreter exit
# ("terminate called without an active exception", launch/torchrun/tracebacks.py), which would fail a
# round of either launcher at random; this benchmark times launching, not that.
SCRIPT = textwrap.dedent("""
    import os, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.ones(8)
    dist.all_reduce(t)
    assert t[0].item() == dist.get_world_size()
    dist.destroy_process_group()
    os._exit(0)
""")


# Both launchers' environment: "-u PYTHONDONTWRITEBYTECODE" turns the bytecode cache on (main()
# drops it with --bytecode-as-is).
ENV = ["env", "-u", "PYTHONDONTWRITEBYTECODE"]


def torchrun_argv(node: int, master: str, port: int, script: Path, run_dir: Path) -> list[str]:
    return [*ENV, "GLOO_SOCKET_IFNAME=eth1", "NCCL_SOCKET_IFNAME==eth1", "OMP_NUM_THREADS=1",
            sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node),
            "--nproc-per-node", "1", "--master-addr", master, "--master-port", str(port),
            "--log-dir", str(run_dir), str(script)]


def ddpkit_argv(node: int, master: str, port: int, script: Path, run_dir: Path) -> list[str]:
    return [*ENV, "OMP_NUM_THREADS=1", sys.executable, "-m", "ddpkit", "launch", "--nnodes", "2",
            "--node-rank", str(node), "--nproc-per-node", "1", "--master-addr", master,
            "--master-port", str(port), "--run-dir", str(run_dir), str(script)]


def _reap(proc: subprocess.Popen[bytes], ended: dict[int, tuple[float, float]]) -> None:
    """Wait for ``proc`` with wait4, which also gives the CPU seconds of the process and of every
    descendant it waited for (torchrun and its ranks included), and note when it ended."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    ended[proc.pid] = (time.monotonic(), usage.ru_utime + usage.ru_stime)


def one_job(cluster: object, build: object, master: str, port: int, script: Path,
            work: Path) -> tuple[float, float]:
    """Seconds from starting both nodes to both exiting, and the CPU seconds both nodes' process
    trees used; raises SystemExit when one fails."""
    procs = []
    ended: dict[int, tuple[float, float]] = {}
    started = time.monotonic()
    try:
        for node in (1, 0):
            log = open(work / f"{port}-node{node}.log", "w")  # noqa: SIM115 - closed by the child
            argv = build(node, master, port, script, work / f"{port}-node{node}")  # type: ignore[operator]
            proc = subprocess.Popen(node_argv(cluster, node, argv),  # type: ignore[arg-type]
                                    stdout=log, stderr=subprocess.STDOUT)
            reaper = threading.Thread(target=_reap, args=(proc, ended), daemon=True)
            reaper.start()
            procs.append((node, log, proc, reaper))
        for node, log, proc, reaper in procs:
            reaper.join(timeout=max(0.0, started + 120 - time.monotonic()))
            log.close()
            if proc.returncode != 0:
                raise SystemExit(f"node {node} exited {proc.returncode}; see {work}/{port}-node{node}.log")
        return (max(end for end, _ in ended.values()) - started, sum(cpu for _, cpu in ended.values()))
    finally:
        for _, log, proc, reaper in procs:
            if proc.returncode is None:
                proc.kill()
                reaper.join(timeout=30)
            log.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 8; quick 3)")
    parser.add_argument("--quick", action="store_true", help="short mode (also when CI=true)")
    parser.add_argument("--check", action="store_true", help=f"exit 1 above {TARGET:g}x")
    parser.add_argument("--keep", type=Path, default=None, help="keep the logs in this directory")
    parser.add_argument("--name", default="dkovh", help="sim cluster name")
    parser.add_argument("--subnet", default="10.213.91.0/24", help="sim private subnet")
    parser.add_argument("--bytecode-as-is", action="store_true",
                        help="keep the caller's PYTHONDONTWRITEBYTECODE (default: cache on for both)")
    args = parser.parse_args()
    if args.bytecode_as_is:
        ENV[:] = ["env"]
    if os.geteuid() != 0:
        print("launch_overhead: needs root (network namespaces); skipped", file=sys.stderr)
        return 0
    quick = args.quick or os.environ.get("CI", "").lower() == "true"
    rounds = args.rounds or (3 if quick else 8)
    with tempfile.TemporaryDirectory(prefix="ddpkit-overhead-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        script = work / "tiny_job.py"
        script.write_text(SCRIPT)
        down(args.name)
        cluster = up(SimSpec(nodes=2, name=args.name, subnet=args.subnet))
        try:
            master = cluster.nodes[0].private_address
            times: dict[str, list[float]] = {"torchrun": [], "ddpkit": []}
            cpu: dict[str, list[float]] = {"torchrun": [], "ddpkit": []}
            port = 29600
            for build in (torchrun_argv, ddpkit_argv):  # warm caches (files, bytecode), not counted
                port += 1
                one_job(cluster, build, master, port, script, work)
            for index in range(rounds):
                order = [("torchrun", torchrun_argv), ("ddpkit", ddpkit_argv)]
                for label, build in order if index % 2 == 0 else order[::-1]:
                    port += 1
                    wall, used = one_job(cluster, build, master, port, script, work)
                    times[label].append(wall)
                    cpu[label].append(used)
        finally:
            down(args.name)
    base, ours = statistics.median(times["torchrun"]), statistics.median(times["ddpkit"])
    ratio = ours / base
    bytecode = ("as the caller has it: " + ("off" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on")
                if args.bytecode_as_is else "on for both")
    print(f"tiny 2-node job on a sim, {rounds} round(s), alternating; medians of wall seconds; "
          f"bytecode cache {bytecode}")
    print(f"torchrun + GLOO_SOCKET_IFNAME by hand: {base:6.2f} s  "
          f"({', '.join(f'{t:.2f}' for t in times['torchrun'])})")
    print(f"ddpkit launch:                         {ours:6.2f} s  "
          f"({', '.join(f'{t:.2f}' for t in times['ddpkit'])})")
    print(f"ratio ddpkit/torchrun: {ratio:.2f}x (+{ours - base:.2f} s per launch); "
          f"target <= {TARGET:g}x: {'meets' if ratio <= TARGET else 'misses'}")
    # Each round ran its two jobs back to back, so a round's own ratio cancels most of a slow
    # drift in the machine's load; shown beside the target's figure, which it does not replace.
    paired = [d / t for d, t in zip(times["ddpkit"], times["torchrun"])]
    print(f"per-round ratios: median {statistics.median(paired):.2f}x "
          f"(min {min(paired):.2f}, max {max(paired):.2f})")
    # CPU seconds are far less noisy than wall seconds on a shared 2-core box: the difference is
    # what ddpkit itself costs both nodes (its own process, the `ip route` it runs), and every
    # CPU second it uses while the ranks start is one they wait for on a machine this small.
    base_cpu, ours_cpu = statistics.median(cpu["torchrun"]), statistics.median(cpu["ddpkit"])
    print(f"CPU seconds per job, both nodes' process trees (median): torchrun {base_cpu:.2f}, "
          f"ddpkit {ours_cpu:.2f} (+{ours_cpu - base_cpu:.2f})")
    return 1 if args.check and ratio > TARGET else 0


if __name__ == "__main__":
    from ddpkit.errors import DdpkitError

    try:
        sys.exit(main())
    except DdpkitError as exc:
        sys.exit(f"launch_overhead: {exc.message} ({exc.hint})")
