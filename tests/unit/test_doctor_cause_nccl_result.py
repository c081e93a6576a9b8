"""causes/nccl_result.py: the ncclResult_t a failure returned names its kind when no rule
reads the failure's own words: by its name or ncclGetErrorString's text where the error is
quoted, or from NCCL's return chain. Sources of the lines:

- NCCL v2.21.5 src/include/checks.h, NCCLCHECK: ``INFO(NCCL_ALL,"%s:%d -> %d", __FILE__,
  __LINE__, res)`` at each level a failure returns through; the debug prefix of
  src/debug.cc (``%s:%d:%d [%d] NCCL INFO `` : host, pid, tid, cuda device)
- NCCL v2.21.5 src/nccl.h.in, ncclResult_t: 1 ncclUnhandledCudaError, 2 ncclSystemError,
  3 ncclInternalError, 4 ncclInvalidArgument, 5 ncclInvalidUsage, 6 ncclRemoteError; src/init.cc
  ncclGetErrorString: "internal error - please report this issue to the NCCL developers",
  "invalid argument", "invalid usage", "unhandled system error"
- torch v2.4 torch/csrc/distributed/c10d/NCCLUtils.hpp, C10D_NCCL_CHECK: ``NCCL error in: %s:%d,
  %s (run with NCCL_DEBUG=INFO for details), NCCL version %s`` with getNcclErrorDetailStr's
  ``ncclInvalidUsage: This usually reflects invalid usage of NCCL library.`` and ``Last error:``
- nccl-tests src/common.h, NCCLCHECK: ``%s: Test NCCL failure %s:%d '%s'``
- vLLM vllm/distributed/device_communicators/pynccl_wrapper.py, NCCL_CHECK: ``raise
  RuntimeError(f"NCCL error: {error_str}")``, error_str being ncclGetErrorString's text
- the WARN lines are made up (no catalogue template): "NCCL WARN Some check on node x failed"
- NCCL src/init.cc ncclGetErrorString's default branch: "unknown result code" (a code this
  library does not define); TensorRT-LLM cpp/include/tensorrt_llm/common/cudaUtils.h-style
  NCCLCHECK: ``printf("Failed, NCCL error %s:%d '%s'\n", __FILE__, __LINE__,
  ncclGetErrorString(r))``
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

PREFIX = "node1:2196:2275 [1] "


def _chain(code: int, warn: str = "Some check on node cpu failed") -> list[str]:
    return [PREFIX + "NCCL INFO NCCL version 2.21.5+cuda12.4",
            PREFIX + f"graph/xml.h:101 NCCL WARN {warn}",
            PREFIX + f"NCCL INFO graph/topo.cc:493 -> {code}",
            PREFIX + f"NCCL INFO graph/topo.cc:623 -> {code}",
            PREFIX + f"NCCL INFO init.cc:880 -> {code}"]


@pytest.mark.parametrize(("code", "expected"), [(3, "internal-error"), (4, "invalid-usage"),
                                                (5, "invalid-usage")])
def test_the_chain_s_code_names_the_failure(tmp_path: Path, code: int, expected: str) -> None:
    found = top(tmp_path, _chain(code))
    assert (found.id, found.severity) == (expected, "error")
    assert any(f" -> {code}" in e.text for e in found.evidence)


@pytest.mark.parametrize("code", [2, 6])
def test_the_network_s_codes_are_left_to_the_rules_that_read_the_network(tmp_path: Path,
                                                                          code: int) -> None:
    assert top(tmp_path, _chain(code)).id not in ("internal-error", "invalid-usage")


def test_the_first_chain_decides(tmp_path: Path) -> None:
    # an internal error first; a later call's invalid usage is its aftermath
    assert top(tmp_path, _chain(3) + _chain(5, "Another check failed")).id == "internal-error"
    assert top(tmp_path, _chain(5) + _chain(3, "Another check failed")).id == "invalid-usage"


def test_an_arrow_outside_a_source_location_is_not_a_chain(tmp_path: Path) -> None:
    found = top(tmp_path, [PREFIX + "NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC",
                           PREFIX + "NCCL INFO Ring 00 : 3 -> 0 [send] via NET/Socket/0"])
    assert found.id not in ("internal-error", "invalid-usage")


TORCH = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
         "NCCLUtils.hpp:317, {text} (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5")
DETAIL = {"ncclInvalidUsage": "ncclInvalidUsage: This usually reflects invalid usage of NCCL "
                              "library.",
          "ncclInternalError": "ncclInternalError: Internal check failed."}


@pytest.mark.parametrize(("text", "name", "expected"), [
    ("invalid usage", "ncclInvalidUsage", "invalid-usage"),
    ("internal error - please report this issue to the NCCL developers", "ncclInternalError",
     "internal-error"),
])
def test_the_named_result_of_torch_s_nccl_error_names_the_failure(tmp_path: Path, text: str,
                                                                  name: str,
                                                                  expected: str) -> None:
    lines = [TORCH.format(text=text), DETAIL[name], "Last error:",
             "Error : something NCCL checked, in words no rule knows"]
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == (expected, "error")
    assert name in found.explanation


def test_a_copy_without_torch_s_head_is_read_by_its_detail_line(tmp_path: Path) -> None:
    found = top(tmp_path, ["invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version "
                           "2.26.2", DETAIL["ncclInvalidUsage"]])
    assert (found.id, found.severity) == ("invalid-usage", "error")


def test_nccl_tests_failure_names_its_result(tmp_path: Path) -> None:
    found = top(tmp_path, ["node1: Test NCCL failure common.cu:958 'internal error - please "
                           "report this issue to the NCCL developers / '"])
    assert found.id == "internal-error"


def test_the_same_words_outside_an_nccl_error_are_not_read(tmp_path: Path) -> None:
    found = top(tmp_path, ["ValueError: invalid usage of the config file (see docs)",
                           "warning: internal error counters reset"])
    assert found.id not in ("invalid-usage", "internal-error")


@pytest.mark.parametrize(("text", "expected"), [
    ("invalid usage (run with NCCL_DEBUG=WARN for details)", "invalid-usage"),
    ("internal error - please report this issue to the NCCL developers (run with "
     "NCCL_DEBUG=WARN for details)", "internal-error"),
])
def test_vllms_pynccl_error_is_read_by_its_text(tmp_path: Path, text: str, expected: str) -> None:
    found = top(tmp_path, ["[rank0]:   File \"/opt/vllm/vllm/distributed/device_communicators/"
                           "pynccl_wrapper.py\", line 223, in NCCL_CHECK",
                           "[rank0]:     raise RuntimeError(f\"NCCL error: {error_str}\")",
                           f"[rank0]: RuntimeError: NCCL error: {text}"])
    assert (found.id, found.severity) == (expected, "error")


@pytest.mark.parametrize("line", [
    "Failed, NCCL error /workspace/TensorRT-LLM/cpp/tensorrt_llm/plugins/ncclPlugin/"
    "allreducePlugin.cpp:183 'unknown result code'",
    "node1: Test NCCL failure common.cu:891 'unknown result code'",
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:1970, unknown result code (run with NCCL_DEBUG=INFO for details), NCCL "
    "version 2.18.1",
])
def test_a_result_code_the_library_cannot_name_is_two_nccl_builds(tmp_path: Path,
                                                                  line: str) -> None:
    found = top(tmp_path, [line])
    assert (found.id, found.severity) == ("version-mismatch", "error")
    assert "two NCCL builds" in found.explanation
