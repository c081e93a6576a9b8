"""py-spy's text dump posted in a log (causes/pyspy_dump.py): lines from py-spy's own format
(src/dump.rs, write_trace: 'Thread <id> (<status>): "<name>"', then '    <function> (<file>:<line>)'
a frame, innermost first, ':<line>' left out where it is 0), its values drawn from what py-spy
prints (a decimal native thread id or a hex pthread id; stack_trace.rs's statuses idle, active,
active+gil)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose


def run(tmp_path: Path, lines: list[str]) -> list[Finding]:
    log = tmp_path / "dump.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose([str(log)])


def thread(name: str, frames: list[tuple[str, str, int]], *, ident: str = "0x7F3A5C1D2740",
           status: str = "active") -> list[str]:
    return [f'Thread {ident} ({status}): "{name}"',
            *(f"    {func} ({path}:{line})" if line else f"    {func} ({path})"
              for func, path, line in frames)]


IN_ALL_REDUCE = [("all_reduce", "torch/distributed/distributed_c10d.py", 2501),
                 ("wrapper", "torch/distributed/c10d_logger.py", 83),
                 ("train_step", "train.py", 141), ("<module>", "train.py", 220)]
IN_DATA = [("_next_data", "torch/utils/data/dataloader.py", 1329),
           ("evaluate", "eval_utils.py", 57), ("<module>", "train.py", 231)]
HELPER = [("wait", "threading.py", 324), ("run", "tqdm/_monitor.py", 60)]
# a frame py-spy knows no line of (printed without ":<line>"), inside the collective's call
IN_BARRIER = [("barrier", "torch/distributed/distributed_c10d.py", 4200),
              ("_wrapped", "<frozen importlib._bootstrap>", 0), ("sync", "utils/dist.py", 31),
              ("<module>", "main.py", 88)]


@pytest.mark.parametrize(("ident", "status"), [("0x7F3A5C1D2740", "active"),
                                               ("140231125", "idle"), ("2812", "active+gil")])
def test_a_main_thread_in_a_collective_is_a_hang_there(tmp_path: Path, ident: str,
                                                       status: str) -> None:
    lines = [*thread("Thread-2", HELPER, ident="0x7F3A4C000640", status="idle"),
             *thread("MainThread", IN_ALL_REDUCE, ident=ident, status=status)]
    top, *_ = run(tmp_path, lines)
    assert (top.id, top.severity) == ("job-hung", "warning")  # a dump alone is no failure
    assert "all_reduce at train.py:141" in top.explanation
    assert "line 4" in top.explanation  # the main thread's dump, not the helper's
    assert 4 in [e.line for e in top.evidence]


def test_a_frame_without_its_line_is_still_read(tmp_path: Path) -> None:
    top, *_ = run(tmp_path, thread("MainThread", IN_BARRIER, ident="2812"))
    assert top.id == "job-hung" and "barrier at utils/dist.py:31" in top.explanation


def test_the_process_outside_the_collective_is_named(tmp_path: Path) -> None:
    lines = [*thread("MainThread", IN_ALL_REDUCE), *thread("MainThread", IN_ALL_REDUCE),
             *thread("MainThread", IN_DATA)]
    top, *_ = run(tmp_path, lines)
    assert top.id == "job-hung"
    assert "2 processes waiting in all_reduce" in top.explanation
    assert "line 11" in top.explanation and "eval_utils.py:57" in top.explanation


def test_a_failure_in_the_log_makes_it_an_error(tmp_path: Path) -> None:
    lines = ["[E105 10:00:00.000000000 socket.cpp:1011] [c10d] The client socket has timed out "
             "after 1800000ms while trying to connect to (10.0.0.1, 29500).",
             *thread("MainThread", IN_ALL_REDUCE)]
    findings = run(tmp_path, lines)
    hung = [f for f in findings if f.id == "job-hung"]
    assert hung and hung[0].severity == "error"


@pytest.mark.parametrize("frames", [IN_DATA, HELPER])
def test_a_process_outside_torch_distributed_is_no_hang(tmp_path: Path,
                                                        frames: list[tuple[str, str, int]]) -> None:
    findings = run(tmp_path, thread("MainThread", frames))
    assert "job-hung" not in [f.id for f in findings]
    # nor a run that worked: a dump shows where a process was, not how the run ended
    assert (findings[0].id, findings[0].severity) == ("no-result", "warning")
    assert "py-spy's dump" in findings[0].explanation


def test_another_thread_in_a_collective_is_not_the_process_s_place(tmp_path: Path) -> None:
    lines = [*thread("MainThread", IN_DATA), *thread("Thread-3", IN_ALL_REDUCE)]
    assert "job-hung" not in [f.id for f in run(tmp_path, lines)]


def test_a_crafted_frame_is_shown_without_control_characters(tmp_path: Path) -> None:
    frames = [("all_reduce", "torch/distributed/distributed_c10d.py", 2501),
              ("step\x1b[2J", "train\x07.py", 9)]
    top, *_ = run(tmp_path, thread("MainThread", frames))
    assert top.id == "job-hung" and "\x1b" not in top.explanation and "\x07" not in top.explanation


def test_a_crafted_line_number_is_no_crash(tmp_path: Path) -> None:
    # more digits than Python converts to an int (4300 by default): not a frame, no crash
    lines = [*thread("MainThread", IN_ALL_REDUCE[:1]), "    step (train.py:" + "9" * 5000 + ")"]
    findings = run(tmp_path, lines)
    assert findings and findings[0].id == "job-hung"
