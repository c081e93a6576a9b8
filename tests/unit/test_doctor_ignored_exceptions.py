"""rules/ignored.py: an exception Python reported and ignored is no failure of the run.

Lines made from CPython's unraisable hook (Python/errors.c, _PyErr_WriteUnraisableDefaultHook:
"Exception ignored in: %R", then the traceback as Lib/traceback.py prints it, then
"<type>: <message>"), for the finalizers a training run has: a DataLoader iterator's __del__
(torch/utils/data/dataloader.py, _MultiProcessingDataLoaderIter) and a CUDA stream's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose


def report(exception: str, function: str = "_MultiProcessingDataLoaderIter.__del__") -> list[str]:
    return [f"Exception ignored in: <function {function} at 0x7f3a2c1d5e50>",
            "Traceback (most recent call last):",
            '  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", '
            "line 1479, in __del__",
            "    self._shutdown_workers()",
            exception]


def run(tmp_path: Path, lines: list[str]) -> list[Finding]:
    log = tmp_path / "rank0.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose([str(log)])


def test_an_ignored_exception_at_exit_is_no_failure(tmp_path: Path) -> None:
    lines = ["epoch 9 loss 0.12", *report("AssertionError: can only test a child process")]
    (top, *rest) = run(tmp_path, lines)
    assert (top.id, top.severity) == ("no-failure", "info")
    assert "ignored" in top.explanation and "_MultiProcessingDataLoaderIter" in top.explanation
    assert "InfiniBand" not in top.explanation  # (the entry's NCCL words are not this log's)
    assert not [f for f in rest if f.severity == "error"]


@pytest.mark.parametrize("exception", [
    # the exception's words say more than its type: errno 104 (ECONNRESET, a connection lost), an
    # NCCL error and NCCL's version (ProcessGroupNCCL.cpp's "NCCL error in: %s:%d, %s, NCCL
    # version %s"), each an event of its own on the exception's line
    "ConnectionResetError: [Errno 104] Connection reset by peer",
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, "
    "unhandled system error, NCCL version 2.14.3",
    "[rank1]: BrokenPipeError: [Errno 32] Broken pipe",
])
def test_every_reading_of_the_ignored_exceptions_line_is_ignored(tmp_path: Path,
                                                                 exception: str) -> None:
    tag = "[rank1]: " if exception.startswith("[rank1]") else ""
    lines = ["epoch 9 loss 0.12", *[tag + line for line in report(exception)[:-1]], exception]
    (top, *rest) = run(tmp_path, lines)
    assert (top.id, top.severity) == ("no-failure", "info")
    assert not [f for f in rest if f.severity == "error"]


def test_an_ignored_exception_does_not_hide_the_failure_after_it(tmp_path: Path) -> None:
    lines = [*report("AttributeError: '_MultiProcessingDataLoaderIter' object has no attribute "
                     "'_shutdown'"),
             "Traceback (most recent call last):", '  File "train.py", line 88, in <module>',
             "KeyError: 'labels'"]
    (top, *_) = run(tmp_path, lines)
    assert top.severity == "error" and top.id != "no-failure"
    assert "KeyError" in top.explanation


def test_an_exception_far_after_the_report_is_its_own(tmp_path: Path) -> None:
    # the report's head opens one traceback: an exception past its reach is no part of it
    lines = ["Exception ignored in: <function Stream.__del__ at 0x7f3a2c1d5e50>",
             *(f"step {n} loss 0.5" for n in range(80)), "ValueError: bad value"]
    (top, *_) = run(tmp_path, lines)
    assert top.severity == "error"


def test_its_traceback_is_not_read_as_one_cut_short(tmp_path: Path) -> None:
    # a log of nothing else: the quiet tail sees a traceback; its exception line is the report's
    (top, *_) = run(tmp_path, report("AssertionError: can only test a child process"))
    assert (top.id, top.severity) == ("no-failure", "info")
    assert "not in it" not in top.explanation


def test_each_process_has_its_own_report(tmp_path: Path) -> None:
    # two ranks' reports interleaved line by line under torchrun's tags: each ends its own
    lines = []
    for a, b in zip(report("AssertionError: can only test a child process"),
                    report("AssertionError: can only test a child process"), strict=True):
        lines += [f"[rank0]: {a}", f"[rank1]: {b}"]
    (top, *_) = run(tmp_path, ["[rank0]: epoch 9 loss 0.12", *lines])
    assert (top.id, top.severity) == ("no-failure", "info")
