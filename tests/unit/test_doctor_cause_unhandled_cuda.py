"""causes/unhandled_cuda.py: NCCL's ncclUnhandledCudaError is cuda-error where no rule says
more. Sources of the lines:

- NCCL v2.18.3-1 src/init.cc, ncclGetErrorString: ``case ncclUnhandledCudaError: return
  "unhandled cuda error"`` (the same text from 2.0 on)
- nccl-tests (2017, before "Test") src/common.h NCCLCHECK: ``printf("NCCL failure %s:%d
  '%s'\\n", __FILE__, __LINE__, ncclGetErrorString(res))``; nccl-tests v2.13.8 src/common.h:
  ``"%s: Test NCCL failure %s:%d '%s / %s'\\n"``
- glog's CHECK_EQ (Paddle's nccl_helper.h): "Check failed: result == ncclSuccess (1 vs. 0)"
  then the error string
- torch v1.13.0 torch/csrc/distributed/c10d/NCCLUtils.hpp, C10D_NCCL_CHECK: ``"NCCL error in: "
  + file + ":" + line + ", " + ncclGetErrorWithVersion(result)``
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

OLD_TESTS = "NCCL failure {file}:{line} 'unhandled cuda error'"
GLOG = "F0612 10:0{minor}:01.1 {line} nccl_helper.h:93] Check failed: result == ncclSuccess (1 vs. 0)" \
       "  unhandled cuda error"
NEW_TESTS = "{host}: Test NCCL failure common.cu:{line} 'unhandled cuda error / '"
TORCH = ("RuntimeError: NCCL error in: /opt/pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:{line}, "
         "unhandled cuda error, NCCL version 2.{minor}.8")


@pytest.mark.parametrize("template", [OLD_TESTS, GLOG])
@pytest.mark.parametrize("line,minor", [(95, 7), (891, 9)])
def test_an_unhandled_cuda_error_no_rule_reads_is_a_cuda_error(
        tmp_path: Path, template: str, line: int, minor: int) -> None:
    text = template.format(file="all_reduce.cu", line=line, minor=minor)
    found = top(tmp_path, [text])
    assert (found.id, found.severity) == ("cuda-error", "error")
    assert "unhandled cuda error" in found.evidence[0].text


@pytest.mark.parametrize("template", [NEW_TESTS, TORCH])
def test_a_rules_reading_of_the_nccl_error_says_more(tmp_path: Path, template: str) -> None:
    # rank-failed quotes the NCCL error and gives NCCL_DEBUG=INFO as the next step
    found = top(tmp_path, [template.format(host="node03", line=891, minor=10)])
    assert (found.id, found.severity) == ("rank-failed", "error")


def test_a_more_specific_cause_outranks_it(tmp_path: Path) -> None:
    lines = [TORCH.format(line=825, minor=7),
             "RuntimeError: CUDA error: out of memory"]
    assert top(tmp_path, lines).id == "out-of-memory"


def test_another_nccl_result_is_not_this_cause(tmp_path: Path) -> None:
    line = "node03: Test NCCL failure common.cu:891 'unhandled system error / '"
    assert top(tmp_path, [line]).id != "cuda-error"
