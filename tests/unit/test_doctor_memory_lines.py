"""The host's memory and /dev/shm in torch's own words. Lines made from torch v2.3.0's
c10/core/impl/alloc_cpu.cpp (alloc_cpu: "DefaultCPUAllocator: can't allocate memory: you tried to
allocate %d bytes. Error code %d (%s)"; torch 1.x to 2.x also "DefaultCPUAllocator: not enough
memory: you tried to allocate %d bytes.", each after c10's "[enforce fail at alloc_cpu.cpp:%d]
data.") and aten/src/ATen/MapAllocator.cpp (MapAllocator: "unable to mmap %zu bytes from file
<%s>: %s (%d)", "unable to write to file <%s>: %s (%d)" for the /dev/shm file torch names
/torch_<pid>_<rand>_<n> to share a tensor between processes), with strerror's ENOMEM "Cannot
allocate memory" (12) and ENOSPC "No space left on device" (28). torch 0.x's
torch/lib/TH/THAllocator.c printed the write's failure without an errno: THError's "unable to
write to file <%s>" and " at %s:%d"."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

TRACE = ["Traceback (most recent call last):", '  File "train.py", line 30, in <module>',
         "    for batch in loader:"]


@pytest.mark.parametrize("line", [
    "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough "
    "memory: you tried to allocate 1073741824 bytes.",
    "RuntimeError: [enforce fail at alloc_cpu.cpp:83] err == 0. DefaultCPUAllocator: can't "
    "allocate memory: you tried to allocate 68719476736 bytes. Error code 12 (Cannot allocate "
    "memory)",
])
def test_the_host_out_of_memory(tmp_path: Path, line: str) -> None:
    found = top(tmp_path, [*TRACE, line])
    assert (found.id, found.severity) == ("out-of-memory", "error")


@pytest.mark.parametrize("line", [
    "RuntimeError: unable to mmap 1048576 bytes from file </torch_3245_2906617395_0>: Cannot "
    "allocate memory (12)",
    "RuntimeError: unable to write to file </torch_18692_1955015485_0>: No space left on device "
    "(28)",
    "RuntimeError: unable to write to file </torch_4021_2786213011> at "
    "/pytorch/torch/lib/TH/THAllocator.c:271",
])
def test_a_tensor_shared_through_a_full_dev_shm(tmp_path: Path, line: str) -> None:
    found = top(tmp_path, [*TRACE, line])
    assert (found.id, found.severity) == ("shm", "error")


def test_another_file_that_cannot_be_mapped_is_not_shm(tmp_path: Path) -> None:
    found = top(tmp_path, [*TRACE, "RuntimeError: unable to mmap 4096 bytes from file "
                                   "</data/train.bin>: Cannot allocate memory (12)"])
    assert found.id != "shm"


def test_a_write_to_a_shared_tensor_s_file_with_another_errno_is_not_shm(tmp_path: Path) -> None:
    # an errno that says something else than a full /dev/shm (EBADF, 9) is not read as one
    found = top(tmp_path, [*TRACE, "RuntimeError: unable to write to file </torch_77_12_0>: "
                                   "Bad file descriptor (9)"])
    assert found.id != "shm"
