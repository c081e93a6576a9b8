"""causes/no_backend.py: torch.distributed built without the backend asked for is
invalid-usage. Sources of the lines:

- torch v2.3.0 torch/distributed/distributed_c10d.py, _new_process_group_helper:
  ``raise RuntimeError("Distributed package doesn't have NCCL built in")`` (also MPI's "...
  doesn't have MPI built in. MPI is only included if you build PyTorch from source on a host
  that has MPI installed.", UCC's)
- torch v1.8.0 same file: the literal split over two lines, ``"Distributed package doesn't have
  NCCL "`` ``"built in"``, which a traceback shows as its raise line
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

ERROR = "RuntimeError: Distributed package doesn't have {backend} built in"
RAISE_18 = '    raise RuntimeError("Distributed package doesn\'t have {backend} "'
FRAME = ('  File "{path}/torch/distributed/distributed_c10d.py", line {line}, in '
         "_new_process_group_helper")


@pytest.mark.parametrize("backend", ["NCCL", "MPI"])
@pytest.mark.parametrize("path", ["C:\\Python310\\lib\\site-packages",
                                  "/Library/Python/3.9/site-packages"])
def test_a_build_without_the_backend_is_invalid_usage(tmp_path: Path, backend: str,
                                                      path: str) -> None:
    found = top(tmp_path, ["Traceback (most recent call last):",
                           FRAME.format(path=path, line=1302),
                           RAISE_18.format(backend=backend), ERROR.format(backend=backend)])
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert backend in found.explanation and "gloo" in found.fix


def test_the_raise_line_alone_is_read(tmp_path: Path) -> None:
    found = top(tmp_path, [RAISE_18.format(backend="NCCL") + ' "built in")'])
    assert (found.id, found.severity) == ("invalid-usage", "error")


def test_a_build_with_nccl_is_not_this_cause(tmp_path: Path) -> None:
    found = top(tmp_path, ["torch.distributed.is_nccl_available(): True",
                           "RuntimeError: Distributed package doesn't support this backend"])
    assert found.id != "invalid-usage" or "no NCCL" not in found.explanation
