"""Warnings in their printers' own formats (doctor/log/quiet.py, PYTHON_WARNING and C10_WARNING):
a log of warnings whose texts the catalogue does not hold, with no failure and no end, is
no-failure that says what it holds and what it does not show; the format makes a line a warning,
never a failure, and never hides a failure or an unknown last line.

Python's lines come from CPython's own formatter (``warnings.formatwarning``: file, line, the
category's name, the message, then the source line indented); c10's follow its WarningHandler
(c10/util/Exception.cpp: ``LOG_AT_FILE_LINE(WARNING, file, line) << "Warning: " << msg << "
(function " << func << ")"``) behind glog's ``[W`` prefix, with and without torch 2.2's time.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose

SITE = "/opt/conda/lib/python3.11/site-packages"


def python_warning(category: type[Warning], message: str, file: str, line: int,
                   source: str) -> list[str]:
    return warnings.formatwarning(message, category, file, line, source).rstrip("\n").split("\n")


TORCH_FUTURE = python_warning(FutureWarning, "`torch.distributed._shard.checkpoint` will be "
                              "deprecated, use `torch.distributed.checkpoint` instead",
                              f"{SITE}/torch/distributed/_shard/checkpoint/__init__.py", 8,
                              "warnings.warn(")
APP_USER = python_warning(UserWarning, "To copy construct from a tensor, it is recommended to use "
                          "sourceTensor.clone().detach()", "/app/train/data.py", 27,
                          "batch = torch.tensor(batch, dtype=torch.int)")
C10 = ["[rank1]:[W Utils.hpp:135] Warning: Environment variable NCCL_BLOCKING_WAIT is deprecated; "
       "use TORCH_NCCL_BLOCKING_WAIT instead (function getCvarBool)",
       "[W1204 09:50:12.118000 123 torch/csrc/distributed/c10d/Utils.hpp:135] Warning: Environment "
       "variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING "
       "instead (function getCvarInt)"]


def run(tmp_path: Path, lines: list[str]) -> list[Finding]:
    log = tmp_path / "node.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose([str(log)])


@pytest.mark.parametrize("lines", [TORCH_FUTURE, APP_USER, [*APP_USER, *TORCH_FUTURE], C10[:1],
                                   C10[1:], [*APP_USER, C10[0]]])
def test_a_log_of_warnings_only_is_no_failure_that_says_so(tmp_path: Path,
                                                           lines: list[str]) -> None:
    (finding,) = run(tmp_path, lines)
    assert (finding.id, finding.severity) == ("no-failure", "info")
    assert "not that the run failed" in finding.explanation
    assert "does not show the run finishing" in finding.explanation
    assert "InfiniBand" not in finding.explanation  # the NCCL words are not this log's
    assert finding.evidence and finding.evidence[0].line == 1


def test_the_warning_is_quoted_from_its_category_on(tmp_path: Path) -> None:
    (finding,) = run(tmp_path, TORCH_FUTURE)
    assert "`FutureWarning: `torch.distributed._shard.checkpoint` will be" in finding.explanation
    assert SITE not in finding.explanation


def test_a_second_indented_line_is_not_the_warning_s_source_line(tmp_path: Path) -> None:
    # a progress bar after the source line, the log cut there: not known, so no verdict
    (finding,) = run(tmp_path, [*APP_USER, "  0%|          | 2/5789 [00:01<1:16:01,  1.27it/s]"
                                "[node1:37720:0:37"])
    assert finding.id == "no-result"


def test_an_unknown_last_line_after_a_warning_leaves_no_verdict(tmp_path: Path) -> None:
    (finding,) = run(tmp_path, [*TORCH_FUTURE, "Floating point exception (signal 8) at 0x7f3a"])
    assert finding.id == "no-result"


def test_a_failure_beside_the_warnings_is_the_finding(tmp_path: Path) -> None:
    found = run(tmp_path, [*TORCH_FUTURE, "RuntimeError: CUDA error: an illegal memory access was "
                           "encountered", C10[0]])
    assert found[0].severity == "error" and found[0].id != "no-failure"


def test_an_exception_that_quotes_a_warning_category_is_still_a_failure(tmp_path: Path) -> None:
    # Python's warnings are known by their format, not by the category's name in a line: an
    # exception whose message names "UserWarning" (warnings turned into errors, `-W error`) failed
    found = run(tmp_path, ["Traceback (most recent call last):",
                           '  File "/app/train.py", line 12, in <module>',
                           "RuntimeError: the run stops on a UserWarning: step 3 produced NaN"])
    assert found[0].severity == "error" and found[0].id != "no-failure", found[0]

