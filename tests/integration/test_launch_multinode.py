"""The multi-node core on a simulated cluster: the seed's failure reproduced, and fixed by ddpkit.

Each node is a network namespace whose eth0 is the same unreachable 172.17.0.4 everywhere and whose
hostname resolves to it; eth1 is the private network. Every test tears its cluster down and fails
if any process was left inside a node.
"""

from __future__ import annotations

import json
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
from console_noise import assert_quiet_console
from multinode import NodeRun, alive, ddpkit, descendants, simulated, start, wait_all

from ddpkit.errors import ExitCode
from ports import free_port

pytestmark = [pytest.mark.root, pytest.mark.slow]

ALL_REDUCE = textwrap.dedent("""
    import datetime, os, torch, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    t = torch.ones(4)
    dist.all_reduce(t)
    assert t[0].item() == dist.get_world_size(), t
    print(f"rank {dist.get_rank()} all_reduce ok", flush=True)
    dist.destroy_process_group()
""")




def _test_json(run: NodeRun) -> dict:  # type: ignore[type-arg]
    assert run.out.strip(), f"node {run.index} printed no JSON; stderr:\n{run.err[-3000:]}"
    return json.loads(run.out)  # type: ignore[no-any-return]


@pytest.mark.timeout(240)
def test_seed_failure_plain_torchrun_does_not_complete_but_ddpkit_launch_does(tmp_path: Path) -> None:
    script = tmp_path / "allreduce.py"
    script.write_text(ALL_REDUCE)
    with simulated(2) as cluster:
        master = cluster.nodes[0].private_address
        port = free_port()
        plain = [start(cluster, i, [sys.executable, "-m", "torch.distributed.run", "--nnodes=2",
                                    f"--node-rank={i}", f"--master-addr={master}",
                                    f"--master-port={port}", str(script)])
                 for i in range(2)]
        finished = wait_all(plain, timeout=60)
        # Bounded by the timeout: either a node hung (killed at 60 s) or the job failed.
        assert not (finished and all(r.code == 0 for r in plain)), "plain torchrun unexpectedly passed"
        assert "all_reduce ok" not in "".join(r.out for r in plain)

        port = free_port()
        fixed = [start(cluster, i, ddpkit("launch", "--nnodes", "2", "--node-rank", str(i),
                                          "--master-addr", master, "--master-port", str(port),
                                          "--run-dir", str(tmp_path / f"run{i}"), str(script)))
                 for i in range(2)]
        assert wait_all(fixed, timeout=120), "ddpkit launch did not finish"
        for run in fixed:
            assert run.code == 0, run.err[-3000:]
            assert "inter-node interface eth1" in run.err and "set GLOO_SOCKET_IFNAME" in run.err
        assert "all_reduce ok" in fixed[0].out and "all_reduce ok" in fixed[1].out
        assert_quiet_console(*(run.out + run.err for run in fixed))


def _run_test(cluster, tmp_path: Path, nproc: int = 1, extra: tuple[str, ...] = ()) -> list[NodeRun]:  # type: ignore[no-untyped-def]
    master = cluster.nodes[0].private_address
    port = str(free_port())
    runs = [start(cluster, i, ddpkit("test", "--quick", "--json", "--nnodes", str(len(cluster.nodes)),
                                     "--node-rank", str(i), "--master-addr", master, "--master-port",
                                     port, "--nproc-per-node", str(nproc), "--run-dir",
                                     str(tmp_path / f"node{i}"), "--pg-timeout", "40", *extra))
            for i in range(len(cluster.nodes))]
    finished = wait_all(runs, timeout=200)
    assert finished, "ddpkit test did not finish in time:\n" + "\n".join(
        f"--- node {r.index} exit {r.code}\n{r.err[-2500:]}" for r in runs)
    return runs


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nodes, nproc", [(2, 1), (2, 2), (3, 1)])
def test_ddpkit_test_passes_across_nodes(tmp_path: Path, nodes: int, nproc: int,  # type: ignore[no-untyped-def]
                                        assert_fits) -> None:
    with simulated(nodes) as cluster:
        runs = _run_test(cluster, tmp_path, nproc)
    for run in runs:
        assert run.code == 0, run.err[-3000:]
        assert_quiet_console(run.out, run.err)
        assert_fits(run.err)  # stdout is the JSON document
        doc = _test_json(run)
        assert doc["schema"] == "ddpkit.test/1"
        assert doc["ok"] is True and doc["complete"] is True
        assert (doc["nodes"], doc["ranks_per_node"]) == (nodes, nproc)
        assert sorted(r["rank"] for r in doc["ranks"]) == list(range(nodes * nproc))
        assert {r["host"] for r in doc["ranks"]} == {f"node{i}" for i in range(nodes)}
        for rank in doc["ranks"]:
            assert rank["interfaces_used"] == ["eth1"], rank
            assert not any(a.startswith("172.17.") for a in rank["addresses_used"])
        assert f"{nodes} nodes × {nproc} rank" in doc["summary"]
        assert "all checks passed" in doc["summary"] and "via eth1" in doc["summary"]


@pytest.mark.timeout(300)
def test_ddpkit_test_with_differently_named_private_nics(tmp_path: Path) -> None:
    with simulated(2, ifnames={1: "ens5"}) as cluster:
        runs = _run_test(cluster, tmp_path)
    for run in runs:
        assert run.code == 0, run.err[-3000:]
    assert "inter-node interface ens5" in runs[1].err
    doc = _test_json(runs[0])
    used = {r["host"]: r["interfaces_used"] for r in doc["ranks"]}
    assert used == {"node0": ["eth1"], "node1": ["ens5"]}


@pytest.mark.timeout(120)
def test_unreachable_master_fails_within_the_connect_timeout(tmp_path: Path) -> None:
    with simulated(2) as cluster:
        nobody = cluster.nodes[0].private_address.rsplit(".", 1)[0] + ".99"
        (tmp_path / "x.py").write_text("print('never runs')\n")  # the entry is checked first
        started = time.monotonic()
        run = start(cluster, 1, ddpkit("launch", "--nnodes", "2", "--node-rank", "1", "--master-addr",
                                       nobody, "--connect-timeout", "4", "--run-dir",
                                       str(tmp_path / "r"), str(tmp_path / "x.py")))
        assert wait_all([run], timeout=60)
        elapsed = time.monotonic() - started
    assert run.code == ExitCode.NETWORK
    assert "error [master-unreachable]" in run.err
    assert f"{nobody}:29500" in run.err and "eth1" in run.err
    assert elapsed < 30


@pytest.mark.timeout(120)
def test_busy_master_port_is_refused_before_any_worker_starts(tmp_path: Path) -> None:
    with simulated(2) as cluster:
        port = free_port()
        holder = start(cluster, 0, [sys.executable, "-c", textwrap.dedent(f"""
            import socket, time
            s = socket.socket(); s.bind(("0.0.0.0", {port})); s.listen(); print("ready", flush=True)
            time.sleep(60)
        """)])
        assert holder.proc.stdout is not None and holder.proc.stdout.readline().strip() == "ready"
        master = cluster.nodes[0].private_address
        (tmp_path / "x.py").write_text("print('never runs')\n")  # the entry is checked first
        run = start(cluster, 0, ddpkit("launch", "--nnodes", "2", "--node-rank", "0", "--master-addr",
                                       master, "--master-port", str(port), "--run-dir",
                                       str(tmp_path / "r"), str(tmp_path / "x.py")))
        assert wait_all([run], timeout=60)
        holder.proc.kill()
        wait_all([holder], timeout=10)
    assert run.code == ExitCode.NETWORK
    assert "error [port-in-use]" in run.err and str(port) in run.err
    assert not (tmp_path / "r").exists(), "a worker run started despite the busy port"


@pytest.mark.timeout(200)
def test_a_failing_rank_is_named_and_nothing_is_left_behind(tmp_path: Path) -> None:
    script = tmp_path / "fail.py"
    script.write_text(textwrap.dedent("""
        import datetime, os, sys, time, torch, torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=15))
        if dist.get_rank() == 1:
            print("rank 1 gives up", file=sys.stderr, flush=True)
            sys.exit(3)
        dist.barrier()
    """))
    with simulated(2) as cluster:
        master = cluster.nodes[0].private_address
        port = str(free_port())
        runs = [start(cluster, i, ddpkit("launch", "--nnodes", "2", "--node-rank", str(i),
                                         "--master-addr", master, "--master-port", port,
                                         "--run-dir", str(tmp_path / f"n{i}"), str(script)))
                for i in range(2)]
        assert wait_all(runs, timeout=150)
    assert all(r.code == ExitCode.JOB_FAILED for r in runs), [(r.code, r.err[-800:]) for r in runs]
    assert "error [job-failed]" in runs[1].err
    assert "rank 1 (local rank 0, host node1) failed first: exit code 3" in runs[1].err
    assert "rank 1 gives up" in runs[1].err


@pytest.mark.timeout(200)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupting_the_launcher_stops_every_process(tmp_path: Path, sig: signal.Signals) -> None:
    script = tmp_path / "slow.py"
    marker = tmp_path / "started"
    script.write_text(textwrap.dedent(f"""
        import datetime, os, pathlib, time, torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
        pathlib.Path("{marker}" + os.environ["RANK"]).write_text(str(os.getpid()))
        time.sleep(120)
    """))
    with simulated(2) as cluster:
        master = cluster.nodes[0].private_address
        port = str(free_port())
        runs = [start(cluster, i, ddpkit("launch", "--nnodes", "2", "--node-rank", str(i),
                                         "--master-addr", master, "--master-port", port,
                                         "--run-dir", str(tmp_path / f"n{i}"), str(script)))
                for i in range(2)]
        deadline = time.monotonic() + 90
        while not all(Path(f"{marker}{r}").exists() for r in range(2)):
            assert time.monotonic() < deadline, "workers never started"
            time.sleep(0.2)
        census = {r.index: descendants(r.proc.pid) for r in runs}
        assert all(len(procs) >= 2 for procs in census.values())  # torchrun + its worker, each node
        for run in runs:
            run.proc.send_signal(sig)
        assert wait_all(runs, timeout=60)
        for run in runs:
            assert run.code == ExitCode.INTERRUPTED, run.err[-2000:]
            assert alive(census[run.index]) == [], f"node {run.index} left processes behind"
