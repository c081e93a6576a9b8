"""On a sim cluster with no private network (``sim up --no-private-network``: every node has only
eth0 172.17.0.4, reaching no other node), ``ddpkit test`` says so in one sentence within 30 s, in
English and in Chinese, instead of waiting for a rendezvous that cannot happen."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from multinode import NodeRun, ddpkit, error_message, start, wait_all

from ddpkit.errors import ExitCode
from ddpkit.sim import SimCluster, SimSpec, up

pytestmark = [pytest.mark.root, pytest.mark.slow]
LIMIT_S = 30.0


@pytest.fixture
def no_private_cluster(sim_reservation: Callable[[], Any]) -> SimCluster:
    """Torn down by ``sim_reservation``, which also fails on anything left behind."""
    reservation = sim_reservation()
    return up(SimSpec(nodes=2, name=reservation.name, subnet=reservation.subnet,
                      private_network=False))


def _run(cluster: SimCluster, tmp_path: Path, *args: str, lang: str = "en") -> list[NodeRun]:
    """``ddpkit test`` on every node as the provider's guide has it, with the master address each
    instance's ifconfig shows; returns once all ended (they must, within LIMIT_S)."""
    started = time.monotonic()
    runs = [start(cluster, i, ddpkit("--lang", lang, "test", "--quick", "--nnodes", "2",
                                     "--node-rank", str(i), "--master-addr", "172.17.0.4",
                                     "--run-dir", str(tmp_path / f"{lang}{i}"), *args))
            for i in range(2)]
    finished = wait_all(runs, timeout=LIMIT_S)
    took = time.monotonic() - started
    assert finished and took < LIMIT_S, f"ddpkit test ran {took:.1f} s: " + "\n".join(
        f"--- node {r.index} exit {r.code}\n{r.err[-2000:]}" for r in runs)
    return runs


@pytest.mark.timeout(120)
def test_ddpkit_test_says_there_is_no_network_between_the_instances(
        no_private_cluster: SimCluster, tmp_path: Path) -> None:
    for run in _run(no_private_cluster, tmp_path):
        assert run.code == ExitCode.NETWORK, run.err[-2000:]
        message = error_message(run.err)
        assert message.startswith("error [no-private-network]"), run.err[-2000:]
        assert "tried eth0 172.17.0.4, a NAT address in Docker's default subnet" in message
        assert "the instances have no network between them" in message
        assert "more GPUs in one instance" in message and "WireGuard or Tailscale" in message
        assert "Traceback" not in run.err


@pytest.mark.timeout(120)
def test_in_chinese(no_private_cluster: SimCluster, tmp_path: Path) -> None:
    for run in _run(no_private_cluster, tmp_path, lang="zh"):
        assert run.code == ExitCode.NETWORK, run.err[-2000:]
        joined = "".join(line.strip() for line in run.err.splitlines())
        assert "[no-private-network]" in joined, run.err[-2000:]
        for words in ("本节点没有任何网卡能连到其他实例", "实例之间没有内网", "在一个实例里租用多卡",
                      "WireGuard", "/dev/net/tun"):
            assert words in joined, run.err[-2000:]


@pytest.mark.timeout(120)
def test_token_master_and_cluster_doctor_say_it_too(no_private_cluster: SimCluster,
                                                    tmp_path: Path) -> None:
    """Without --master-addr node 0 would print a join token no instance can use; the cluster
    doctor's meeting would wait for nodes that cannot come."""
    runs = [start(no_private_cluster, 0, ddpkit("test", "--nnodes", "2", "--run-dir",
                                                str(tmp_path / "token"))),
            start(no_private_cluster, 1, ddpkit("doctor", "--nnodes", "2", "--node-rank", "1",
                                                "--master-addr", "172.17.0.4"))]
    assert wait_all(runs, timeout=LIMIT_S)
    for run in runs:
        assert run.code == ExitCode.NETWORK, run.err[-2000:]
        assert error_message(run.err).startswith("error [no-private-network]"), run.err[-2000:]
