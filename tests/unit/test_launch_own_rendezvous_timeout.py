"""A node whose torchrun gives up on the rendezvous itself, before ddpkit's own bound stops it,
ends as the same rendezvous-timeout (exit 5), not as a failed job: both bounds are --rdzv-timeout
(torchrun's --rdzv-conf timeout, ddpkit's with a grace), so on a busy machine either comes first
(CI once saw torchrun's first: exit 6, job-failed). The launcher log is what the real torchrun
2.13 printed as node 0 of two whose other node never started (tests/fixtures/logs/torchrun-cpu/
alone_static, made by its make.sh)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from node_results import node_result

from ddpkit.errors import ExitCode, NetworkProblem
from ddpkit.launch.node import session

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "torchrun-cpu"


class _Watch:
    hung = False
    reports: list[object] = []


def test_torchruns_own_rendezvous_timeout_is_the_rendezvous_timeout(tmp_path: Path) -> None:
    shutil.copy(RUNS / "alone_static" / "console.log", tmp_path / "torchrun.log")
    result = node_result(tmp_path, 0)
    with pytest.raises(NetworkProblem) as raised:
        session._verdict(result.plan, None, result, _Watch())  # type: ignore[arg-type]
    assert raised.value.error_id == "rendezvous-timeout"
    assert raised.value.exit_code == ExitCode.NETWORK


def test_another_failure_before_any_rank_stays_a_failed_job(tmp_path: Path) -> None:
    # torchrun's own store could not listen (the master port taken): no rendezvous timed out
    shutil.copy(RUNS / "busy" / "console.log", tmp_path / "torchrun.log")
    result = node_result(tmp_path, 0)
    with pytest.raises(Exception) as raised:
        session._verdict(result.plan, None, result, _Watch())  # type: ignore[arg-type]
    assert getattr(raised.value, "error_id", None) != "rendezvous-timeout"
