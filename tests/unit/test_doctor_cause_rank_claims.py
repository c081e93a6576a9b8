"""causes/rank_claims.py: a global rank taken twice while others are never taken is
rank-assignment. Sources of the lines: PyTorch Lightning 1.5
(plugins/training_type/ddp.py, init_ddp_connection) ``log.info(f"initializing ddp: GLOBAL_RANK:
{global_rank}, MEMBER: {global_rank + 1}/{world_size}")``; lightning_fabric 2.x
(utilities/distributed.py, _init_dist_connection) "Initializing distributed: GLOBAL_RANK: ...";
Lightning 1.0's slurm_connector.py "initializing ddp (SLURM): GLOBAL_RANK: ..."; Ray's driver
prefix of a worker's lines ("(pid=N, ip=A) ", python/ray/_private/log_monitor.py);
the elastic agent's restart line (torch/distributed/elastic/agent/server/api.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top


def _claims(ranks: list[int], world: int, words: str = "initializing ddp") -> list[str]:
    return [f"{words}: GLOBAL_RANK: {r}, MEMBER: {r + 1}/{world}" for r in ranks]


TRACEBACK = ["Traceback (most recent call last):", '  File "train.py", line 74, in <module>',
             "RuntimeError: connection closed"]


@pytest.mark.parametrize("words", ["initializing ddp", "Initializing distributed",
                                   "initializing distributed", "initializing ddp (SLURM)"])
def test_ranks_taken_twice_and_others_never_are_rank_assignment(tmp_path: Path,
                                                                 words: str) -> None:
    # two 4-GPU nodes that both took node rank 0: ranks 0-3 twice, 4-7 never
    found = top(tmp_path, _claims([1, 1, 2, 2, 3, 3, 0, 0], 8, words) + TRACEBACK)
    assert (found.id, found.severity) == ("rank-assignment", "error")
    assert "0-3" in found.explanation and "4-7" in found.explanation
    assert "--node-rank" in found.fix


def test_without_a_failure_it_is_a_warning(tmp_path: Path) -> None:
    found = top(tmp_path, _claims([0, 0, 1, 1], 4))
    assert (found.id, found.severity) == ("rank-assignment", "warning")


def test_one_node_s_own_ranks_once_each_are_not(tmp_path: Path) -> None:
    # node 0's log of a 2-node job: ranks 0-3 once, 4-7 on the other node
    assert top(tmp_path, _claims([0, 1, 2, 3], 8) + TRACEBACK).id != "rank-assignment"


def test_every_rank_announced_again_after_a_restart_is_not(tmp_path: Path) -> None:
    restart = ("[WARNING] Worker group FAILED. 2/3 attempts left; will restart worker group")
    lines = _claims([0, 1], 4) + TRACEBACK + [restart] + _claims([0, 1], 4)
    assert top(tmp_path, lines).id != "rank-assignment"


@pytest.mark.parametrize("prefix", ["", "(pid=25845, ip=10.0.0.7) ", "[rank1]: "])
def test_a_nodes_own_ranks_at_the_logs_end_are_read_once(tmp_path: Path, prefix: str) -> None:
    # nothing failed, so the quiet tail reads the last lines too: a line's claim counts once, and
    # the log stops inside init_process_group, waiting for the other members
    lines = [prefix + "GPU available: True, used: True",
             *[prefix + line for line in _claims([0, 1], 6, "Initializing distributed")]]
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("no-result", "warning")
    assert "process-group init (line 3)" in found.explanation
    assert "waits in init_process_group for every member" in found.explanation


def test_the_group_formed_is_a_later_stage(tmp_path: Path) -> None:
    lines = _claims([0], 2, "Initializing distributed") + [
        "-" * 100, "distributed_backend=nccl",
        "All distributed processes registered. Starting with 2 processes", "-" * 100]
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("no-result", "warning")
    assert "every process registered in PyTorch Lightning's process group" in found.explanation
