"""Pure: what the ranks' process states and unreadable stacks say about a hang (issue 22)."""

from __future__ import annotations

from ddpkit.launch.hang.stacks import RankStack
from ddpkit.launch.hang.suspects import cause_lines


def _stack(local: int, pid: int, error_id: str | None = None) -> RankStack:
    return RankStack(local_rank=local, pid=pid, rank=local, error_id=error_id,
                     error="denied" if error_id else "")


def test_a_stopped_rank_is_named_first_and_alone() -> None:
    stacks = [_stack(0, 100), _stack(1, 101), _stack(2, 102, "py-spy-not-permitted")]
    lines = cause_lines(stacks, {100: "sleeping", 101: "stopped", 102: "sleeping"})
    assert lines == ["likely cause: rank 1 (pid 101) is stopped (state T: SIGSTOP or a "
                     "debugger): its peers wait for it; `kill -CONT 101` resumes it"]
    assert "state t:" in cause_lines(stacks, {101: "tracing-stop"})[0]


def test_a_rank_py_spy_cannot_read_is_named_when_the_others_could_be_read() -> None:
    stacks = [_stack(0, 100), _stack(1, 101, "py-spy-not-permitted")]
    assert cause_lines(stacks, {100: "sleeping", 101: "sleeping"}) == [
        "likely cause: rank 1 (pid 101): py-spy could not read it [py-spy-not-permitted], while "
        "every rank that could be read is idle"]
    unreadable = [_stack(0, 100, "py-spy-not-permitted"), _stack(1, 101, "py-spy-not-permitted")]
    assert cause_lines(unreadable, {}) == []  # none readable: nothing singles one out
    assert cause_lines([_stack(0, 100), _stack(1, 101, "rank-exited")], {}) == []
