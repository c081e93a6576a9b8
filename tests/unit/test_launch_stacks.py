"""Parsing and grouping ranks' stacks, against real `py-spy dump --json` output (tests/fixtures/pyspy)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ddpkit.launch.hang.stacks import (
    Frame,
    RankStack,
    ThreadStack,
    group,
    locate,
    odd_one_out,
    parse_pyspy_json,
    render_stack,
    summary_lines,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "pyspy"
CODE = {"hang.py:13": "time.sleep(600)", "hang.py:15": "dist.all_reduce(t)"}


def _rank(rank: int, *, node: int = 0, host: str = "node0") -> RankStack:
    text = (FIXTURES / f"rank{rank}.json").read_text()
    threads = parse_pyspy_json(text)
    pid = json.loads(text)[0]["pid"]
    return RankStack(local_rank=rank % 2, pid=pid, rank=rank, node_rank=node, host=host,
                     threads=threads, code=CODE)


def _job() -> list[RankStack]:
    return [_rank(r, node=r // 2, host=f"node{r // 2}") for r in range(4)]


def test_real_dumps_parse_with_frames_innermost_first() -> None:
    threads = parse_pyspy_json((FIXTURES / "rank0.json").read_text())
    assert len(threads) == 1 and threads[0].name == "MainThread"
    assert [f.name for f in threads[0].frames] == ["all_reduce", "_exception_logger.<locals>.wrapper",
                                                    "<module>"]
    assert threads[0].frames[0].short == "torch/distributed/distributed_c10d.py"


def test_a_rank_in_all_reduce_is_placed_in_the_collective_at_its_own_line() -> None:
    place = locate(_rank(0))
    assert place is not None and place.collective and place.call == "all_reduce"
    assert place.key == ("all_reduce", "hang.py:15")
    sleeper = locate(_rank(1))
    assert sleeper is not None and not sleeper.collective and sleeper.key == (None, "hang.py:13")


def test_the_sleeping_rank_is_the_odd_one_out_with_its_node_pid_and_line() -> None:
    stacks = _job()
    groups, failed = group(stacks)
    assert [[m.rank for m in g.members] for g in groups] == [[0, 2, 3], [1]] and failed == []
    odd = odd_one_out(groups)
    assert odd is not None and [m.rank for m in odd[0].members] == [1]
    lines = summary_lines(stacks)
    assert lines[0] == "ranks 0, 2, 3 wait in all_reduce at hang.py:15 `dist.all_reduce(t)`"
    assert lines[1] == f"rank 1 is at hang.py:13 `time.sleep(600)` (node0, pid {stacks[1].pid})"
    assert lines[2].startswith("likely cause: rank 1 (node0, pid ") and \
        "not inside a collective while 3 other ranks wait in all_reduce" in lines[2]


def test_one_node_whose_ranks_all_wait_points_elsewhere() -> None:
    lines = summary_lines([_rank(0), _rank(2)])
    assert lines[0].startswith("ranks 0, 2 wait in all_reduce at hang.py:15")
    assert "another node's report names it" in lines[1]


def test_different_collectives_name_the_smaller_group() -> None:
    stacks = _job()
    frame = stacks[1].threads[0].frames[0]
    barrier = Frame("barrier", "/x/site-packages/torch/distributed/distributed_c10d.py",
                    "torch/distributed/distributed_c10d.py", 4000)
    thread = dataclasses.replace(stacks[0].threads[0], frames=(barrier, frame))
    stacks[1] = dataclasses.replace(stacks[1], threads=(thread,))
    lines = summary_lines(stacks)
    assert lines[1].startswith("rank 1 waits in barrier at hang.py:13")
    assert lines[2].startswith("likely cause: rank 1") and "different place" in lines[2]


def test_a_rank_without_a_stack_is_listed_with_its_fix() -> None:
    stacks = [*_job()[:3], RankStack(local_rank=1, pid=99, rank=3, error_id="py-spy-not-permitted",
                                     error="py-spy may not read pid 99", fix="add SYS_PTRACE")]
    lines = summary_lines(stacks)
    assert lines[-1] == ("rank 3 (pid 99): no stack [py-spy-not-permitted]: py-spy may not read "
                         "pid 99; fix: add SYS_PTRACE")
    assert "no stack [py-spy-not-permitted]" in render_stack(stacks[-1])


def test_library_frames_below_user_code_name_the_call() -> None:
    wait = Frame("wait", "/usr/lib/python3.11/threading.py", "threading.py", 320)
    user = Frame("step", "/home/u/train.py", "train.py", 37)
    stack = RankStack(local_rank=0, pid=5, rank=0, threads=(ThreadStack(5, "MainThread", 5, False,
                                                                        (wait, user)),))
    place = locate(stack)
    assert place is not None and place.call == "wait" and not place.collective
    assert place.describe() == "is in wait at train.py:37"


def test_text_rendering_follows_py_spy_and_json_carries_the_frames() -> None:
    stack = _rank(1)
    text = render_stack(stack)
    assert f"Thread {stack.pid} (idle): \"MainThread\"" in text
    assert "    <module> (hang.py:13)\n        time.sleep(600)" in text
    data = stack.to_dict()
    assert data["where"] == {"call": None, "collective": False, "at": "hang.py:13",
                             "inner": "hang.py:13"}
    assert data["threads"][0]["frames"][0]["line"] == 13
    json.dumps(data)
