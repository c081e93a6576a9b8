"""The ssh rehearsal at 8 nodes, through the CLI as a user runs it (issue 33): `ddpkit sim up 8
--ssh`, `ddpkit test --hostfile` from the host, a launch where node 5's script raises (the master
names node 5, its rank, the exception and its line; nothing is left running on any node within
15 s of the raise), then `ddpkit sim down` leaves no sshd, key, namespace or known_hosts line.
The 32-node run of the same is the benchmark (benchmarks/scale_sim.py)."""

from __future__ import annotations

import json
import os
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from jobs import script, start_in
from multinode import ddpkit, error_message, wait_all

from ddpkit.errors import ExitCode
from ddpkit.sim import inspect

pytestmark = [pytest.mark.root, pytest.mark.slow]

NODES = 8
FAILING = 5
RAISE_LINE = 8
RAISER = textwrap.dedent(f"""\
    import datetime, pathlib, sys, time, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    dist.barrier()
    if dist.get_rank() == {FAILING}:
        pathlib.Path(sys.argv[1], "raised-at").write_text(repr(time.time()))
        print("rank {FAILING}: bad batch ahead", file=sys.stderr, flush=True)
        labels = [0, 1, 2]
        raise ValueError("batch 7 has 3 labels, expected 4")
    for _ in range(600):
        dist.barrier()
        time.sleep(0.1)
""")


def _known_hosts() -> str:
    path = Path.home() / ".ssh" / "known_hosts"
    return path.read_text() if path.exists() else ""


def _busy_nodes(name: str, sshd: dict[str, int]) -> dict[int, int]:
    """Node index -> processes inside it, the node's own sshd listener aside."""
    counts = {i: n - (str(i) in sshd) for i, n in inspect(name).processes.items()}
    return {i: n for i, n in counts.items() if n > 0}


@pytest.mark.timeout(420)
def test_eight_nodes_over_ssh_from_one_command_each(
        sim_reservation: Callable[..., object], tmp_path: Path, assert_fits) -> None:  # type: ignore[no-untyped-def]
    reservation = sim_reservation()
    name, subnet = reservation.name, reservation.subnet  # type: ignore[attr-defined]
    known_before = _known_hosts()
    up = start_in(None, -1, ddpkit("sim", "up", str(NODES), "--ssh", "--name", name,  # type: ignore[arg-type]
                                   "--subnet", subnet, "--json"), tmp_path)
    assert wait_all([up], timeout=90) and up.code == 0, up.err[-3000:]
    ssh = json.loads(up.out)["ssh"]
    assert len(ssh["sshd"]) == NODES
    assert "StrictHostKeyChecking yes" in Path(ssh["ssh_config"]).read_text()
    flags = ["--hostfile", ssh["hostfile"], "--ssh-config", ssh["ssh_config"]]
    try:
        test = start_in(None, -1, ddpkit("test", "--quick", "--run-dir",  # type: ignore[arg-type]
                                         str(tmp_path / "runs"), *flags), tmp_path)
        assert wait_all([test], timeout=200), "ddpkit test did not end"
        assert test.code == 0, test.err[-4000:]
        assert f"{NODES} nodes × 1 rank: all checks passed" in test.out and "via eth1" in test.out
        assert f"  {NODES} of {NODES} hosts ok" not in test.err  # 8 hosts: each listed
        assert_fits(test.out, test.err)
        assert not _busy_nodes(name, ssh["sshd"])

        entry = script(tmp_path, "train.py", RAISER)
        lines = entry.read_text().splitlines()
        assert lines[RAISE_LINE - 1].strip().startswith("raise ValueError")
        launch = start_in(None, -1, ddpkit("launch", "--run-dir",  # type: ignore[arg-type]
                                           str(tmp_path / "runs2"), *flags, str(entry),
                                           str(tmp_path)), tmp_path)
        assert wait_all([launch], timeout=200), "the launch did not end"
        assert launch.code == ExitCode.JOB_FAILED, launch.err[-4000:]
        summary = error_message(launch.err)
        address = f"{subnet.rsplit('.', 1)[0]}.{2 + FAILING}"
        assert summary.startswith(f"error [job-failed]: node {FAILING} ({address}, rank "
                                  f"{FAILING}"), summary
        assert f"ValueError: batch 7 has 3 labels, expected 4 (at train.py:{RAISE_LINE}" in \
            summary, summary
        assert_fits(launch.out, launch.err)
        raised_at = float((tmp_path / "raised-at").read_text())
        while _busy_nodes(name, ssh["sshd"]) and time.time() - raised_at < 15:
            time.sleep(0.2)
        assert not _busy_nodes(name, ssh["sshd"]), \
            f"still running 15 s after the raise: {_busy_nodes(name, ssh['sshd'])}"
    finally:
        down = start_in(None, -1, ddpkit("sim", "down", "--name", name, "--json"), tmp_path)  # type: ignore[arg-type]
        assert wait_all([down], timeout=90) and down.code == 0, down.err[-2000:]
    removed = json.loads(down.out)["removed"]
    assert set(ssh["sshd"].values()) <= set(removed["processes_killed"])
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                   for pid in ssh["sshd"].values())
    assert not os.path.exists(ssh["directory"]) and _known_hosts() == known_before
