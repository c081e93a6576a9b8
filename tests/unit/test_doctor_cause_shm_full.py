"""causes/shm_full.py: ENOSPC on a path in /dev/shm is shm. Sources of the lines:

- CPython 3.11 Objects/exceptions.c: OSError's str, "[Errno {errno}] {strerror}: '{filename}'"
- Linux asm-generic/errno-base.h: ENOSPC 28, strerror "No space left on device"
- Open MPI's and PSM's shared-memory files live under /dev/shm (e.g. psm_shm.<uuid>); the file
  name here is made up, the directory is the tmpfs every container has.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

OSERROR = "OSError: [Errno 28] No space left on device: '{path}'"


@pytest.mark.parametrize("path", ["/dev/shm/psm_shm.0a1b", "/dev/shm/sem.mp-x1y2"])
def test_no_space_in_dev_shm_is_shm(tmp_path: Path, path: str) -> None:
    found = top(tmp_path, [OSERROR.format(path=path)])
    assert (found.id, found.severity) == ("shm", "error")
    assert path in found.explanation and "df -h /dev/shm" in found.fix


def test_no_space_elsewhere_is_not_shm(tmp_path: Path) -> None:
    assert top(tmp_path, [OSERROR.format(path="/data/ckpt/model.pt")]).id != "shm"


def test_another_errno_on_dev_shm_is_not_this_cause(tmp_path: Path) -> None:
    line = "PermissionError: [Errno 13] Permission denied: '/dev/shm/psm_shm.0a1b'"
    found = top(tmp_path, [line])
    assert found.id != "shm" or "ENOSPC" not in found.explanation
