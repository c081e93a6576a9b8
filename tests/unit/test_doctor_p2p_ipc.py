"""A GPU's memory that another process on the node cannot map: intra-node peer-to-peer, p2p.

Lines from the printing programs' formats: oneCCL's Level Zero wrapper (src/common/utils/
ze_call.cpp, do_call: "ze error at <call>, code: <ze_result_t name>", raised by CCL_THROW as
"oneCCL: ze_call.cpp:<line> do_call: EXCEPTION: ...", which torch's XCCL process group raises as
a RuntimeError); Level Zero's zeMemOpenIpcHandle opens a peer process's device allocation, the
counterpart of CUDA's cudaIpcOpenMemHandle."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

ZE = "RuntimeError: oneCCL: ze_call.cpp:{line} do_call: EXCEPTION: ze error at {call}, code: {code}"


@pytest.mark.parametrize("code", ["ZE_RESULT_ERROR_INVALID_ARGUMENT",
                                  "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE"])
@pytest.mark.parametrize("head", ["", "[rank1]: "])
def test_level_zero_failing_to_open_a_peers_memory_is_p2p(tmp_path: Path, code: str,
                                                          head: str) -> None:
    found = top(tmp_path, [head + ZE.format(line=28, call="zeMemOpenIpcHandle", code=code)])
    assert (found.id, found.severity) == ("p2p", "error")
    assert found.explanation.startswith("GPU peer-to-peer failed")


def test_another_level_zero_call_is_no_p2p_finding(tmp_path: Path) -> None:
    found = top(tmp_path, [ZE.format(line=28, call="zeCommandQueueExecuteCommandLists",
                                     code="ZE_RESULT_ERROR_DEVICE_LOST")])
    assert found.id != "p2p"
