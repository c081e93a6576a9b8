"""`env STEPS=60 ddpkit launch --nnodes 2 train.py` in token mode (issue 31): STEPS does not travel
(only an allow-list does), the worker's rank runs with the script's default, and the master says
so before the job starts, because the script reads STEPS by name."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from jobs import ddpkit_in, script, wait_for_files
from multinode import wait_all

from ddpkit.sim.topology import SimCluster

pytestmark = [pytest.mark.root, pytest.mark.slow]

READS_STEPS = """
import json, os, pathlib, sys
steps = int(os.environ.get("STEPS", "10"))
pathlib.Path(sys.argv[1], f"steps{os.environ['RANK']}.json").write_text(json.dumps(steps))
"""


@pytest.mark.timeout(150)
def test_a_variable_set_only_on_the_master_is_named_before_the_job_starts(
        sim_cluster: Callable[..., SimCluster], tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    train = script(tmp_path, "train.py", READS_STEPS)
    token_file = tmp_path / "token"
    master = ddpkit_in(cluster, 0, tmp_path, "launch", "--nnodes", "2", "--join-timeout", "60",
                       "--token-file", str(token_file), "--run-dir", str(tmp_path / "node0"),
                       str(train), str(tmp_path), env={"STEPS": "60"})
    wait_for_files([token_file], [master], timeout=60)
    worker = ddpkit_in(cluster, 1, tmp_path, "join", "--token-file", str(token_file),
                       "--run-dir", str(tmp_path / "node1"))
    assert wait_all([master, worker], timeout=120)
    assert master.code == 0 and worker.code == 0, master.err[-3000:] + worker.err[-3000:]
    steps = [json.loads((tmp_path / f"steps{rank}.json").read_text()) for rank in (0, 1)]
    assert steps == [60, 10]  # what the warning is about: the worker ran with the default
    lines = master.err.splitlines()
    warned = next(i for i, line in enumerate(lines) if "read by the script" in line)
    started = next(i for i, line in enumerate(lines) if "node 0/2" in line)
    assert warned < started, master.err[-3000:]
    assert "STEPS" in " ".join(lines[warned:warned + 3]) and "60" not in lines[warned]
