"""Issue 35: `ddpkit test` across a simulated two-node cluster with LANG=zh_CN.UTF-8 (the README's
main job, in Chinese): both nodes print Chinese (the check table's details included) at 80
columns, no English sentence outside code, flags, ids and quoted rank output (tests/zh_text.py)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from multinode import ddpkit, start, wait_all

from ddpkit.sim import SimCluster
from zh_text import problems

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(240)
def test_ddpkit_test_in_chinese(sim_cluster: Callable[..., SimCluster], tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.setenv("COLUMNS", "80")
    assert os.environ["LANG"] == "zh_CN.UTF-8"
    cluster = sim_cluster(nodes=2)
    master, port = cluster.nodes[0].private_address, str(_port())
    runs = [start(cluster, i, ddpkit("test", "--quick", "--nnodes", "2", "--node-rank", str(i),
                                     "--master-addr", master, "--master-port", port,
                                     "--run-dir", str(tmp_path / f"run{i}")))
            for i in range(2)]
    assert wait_all(runs, timeout=180), "ddpkit test did not finish"
    found: list[str] = []
    for run in runs:
        assert run.code == 0, run.err[-3000:]
        found += problems(f"node {run.index}", run.out + run.err)
    assert "全部检查通过" in runs[0].out + runs[0].err
    assert "个参数在各 rank 间逐位一致" in runs[0].out + runs[0].err  # a rank's detail, in zh
    assert found == [], "\n".join(found)
