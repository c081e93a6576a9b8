"""causes/config_undefined.py: NCCL before 2.17 rejecting 2.17's "undefined" config value is
version-mismatch. Sources of the lines:

- NCCL v2.14.3-1 (and v2.15.5-1, v2.16.5-1) src/init.cc, parseCommConfig: ``WARN("Invalid
  config blocking attribute value %d", internalConfigPtr->blocking)`` for any value but 0 or 1
- NCCL v2.17.1-1 src/nccl.h.in: ``#define NCCL_CONFIG_UNDEF_INT INT_MIN``, the initializer's
  blocking; its init.cc accepts that value
- NCCL's WARN prefix (debug.cc): ``%s:%d:%d [%d] NCCL WARN %s``; torch v2.1.0
  torch/csrc/distributed/c10d/NCCLUtils.hpp: ``NCCL error in: %s:%d, %s, NCCL version %s``,
  then ``ncclInvalidArgument: Invalid value for an argument.``, ``Last error:`` and the WARN's
  text
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

TORCH = ["DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:{line}, "
         "invalid argument, NCCL version {version}",
         "ncclInvalidArgument: Invalid value for an argument.", "Last error:",
         "Invalid config blocking attribute value -2147483648"]
WARN = "{host}:1234:1234 [{dev}] NCCL WARN Invalid config blocking attribute value -2147483648"


@pytest.mark.parametrize("version,line", [("2.14.3", 219), ("2.16.2", 121)])
def test_undefined_blocking_after_torchs_error_is_a_version_mismatch(
        tmp_path: Path, version: str, line: int) -> None:
    found = top(tmp_path, [text.format(line=line, version=version) for text in TORCH])
    assert (found.id, found.severity) == ("version-mismatch", "error")
    assert version in found.explanation and "torch.cuda.nccl.version()" in found.fix


@pytest.mark.parametrize("host,dev", [("node-a", 0), ("gpu17", 3)])
def test_nccls_own_warn_is_read(tmp_path: Path, host: str, dev: int) -> None:
    found = top(tmp_path, [WARN.format(host=host, dev=dev)])
    assert found.id == "version-mismatch" and "2.17" in found.explanation


def test_another_invalid_blocking_value_is_not_this_cause(tmp_path: Path) -> None:
    # a value the user set (NCCL_COMM_BLOCKING=2): an invalid setting, not two NCCLs
    line = "node-a:1234:1234 [0] NCCL WARN Invalid config blocking attribute value 2"
    assert top(tmp_path, [line]).id != "version-mismatch"
