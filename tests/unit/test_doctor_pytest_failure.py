"""A failed test's exception as pytest reports it, and an exception's line ddpkit cannot place.

pytest prints the exception of a failed test with its fail marker before each line: "E" and the
failing source line's indent less one character (_pytest/_code/code.py, FormattedExcinfo.
get_exconly, ``failindent = self.fail_marker + indent[1:]``; the indent is 4 in a short
traceback, else the source's own), after the source lines marked ">" and before the
``path.py:N: ExceptionType`` line. The lines below are built from that format with messages of
torch's own source (ProcessGroupNCCL.cpp's dtype check, distributed_c10d.py's refusals)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose

NCCL_DTYPE = "RuntimeError: Input tensor data type is not supported for NCCL process group: {}"


def top(tmp_path: Path, lines: list[str]) -> Finding:
    log = tmp_path / "test.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose([str(log)])[0]


def pytest_report(indent: int, exception: str) -> list[str]:
    source = " " * indent + "work = group.broadcast([tensor], opts)"
    return ["    def broadcast(tensor, src, group=None):",
            ">" + source[1:],
            "E" + " " * (indent - 1) + exception,
            "",
            "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py:1197: "
            + exception.split(":", 1)[0],
            "=========================== short test summary info ============================",
            "FAILED tests/test_strategy.py::test_bf16_precision - " + exception]


@pytest.mark.parametrize("indent", [4, 8, 12])
@pytest.mark.parametrize("dtype", ["BFloat16", "ComplexFloat"])
@pytest.mark.parametrize("tag", ["", "[rank1]: ", "2024-10-11T20:10:11.640910986Z "])
def test_a_failed_tests_exception_is_read_as_raised(tmp_path: Path, indent: int,
                                                    dtype: str, tag: str) -> None:
    # (a test process run under torchrun tags its lines; kubectl --timestamps stamps them)
    lines = [tag + line for line in pytest_report(indent, NCCL_DTYPE.format(dtype))]
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert dtype in found.explanation


def test_an_exception_quoted_mid_line_is_no_result_not_no_failure(tmp_path: Path) -> None:
    found = top(tmp_path, ["epoch 1 step 10 loss 0.41",
                           "retrying after " + NCCL_DTYPE.format("BFloat16"),
                           "epoch 1 step 20 loss 0.39"])
    assert (found.id, found.severity) == ("no-result", "warning")
    assert "Line 2" in found.explanation


def test_an_exception_a_warning_quotes_stays_no_failure(tmp_path: Path) -> None:
    found = top(tmp_path, ["/opt/x/train.py:12: UserWarning: fell back after "
                           + NCCL_DTYPE.format("BFloat16"),
                           "  warnings.warn(msg)"])
    assert found.id == "no-failure"
