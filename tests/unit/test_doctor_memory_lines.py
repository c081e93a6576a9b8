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


def test_torch_2s_reservation_in_a_full_dev_shm(tmp_path: Path) -> None:
    # torch 2.x's MapAllocator.cpp reserves the pages with posix_fallocate first: "unable to
    # allocate shared memory(shm) for file <%s>: %s (%d)", here ENOSPC (28)
    found = top(tmp_path, [*TRACE, "RuntimeError: Caught RuntimeError in DataLoader worker "
                                   "process 0.", "RuntimeError: unable to allocate shared "
                                   "memory(shm) for file </torch_27480_3525525976_0>: No space "
                                   "left on device (28)"])
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


# c10/cuda/CUDACachingAllocator.cpp's words after "CUDA out of memory. ": to torch 2.0 "Tried to
# allocate %s (GPU %d; %s total capacity; %s already allocated; %s free; ...", from torch 2.1
# "Tried to allocate %s. GPU %d has a total capacity of %s of which %s is free. ...", each size
# in format_size's words ("%.2f MiB", "%d bytes"). A terminal that wraps at a fixed width can
# cut the words "out of memory" in two, and only the allocator's own words then stay whole.
@pytest.mark.parametrize("tail", [
    "Tried to allocate 354.00 MiB (GPU 0; 10.91 GiB total capacity; 9.27 GiB already allocated; "
    "207.38 MiB free; 9.40 GiB reserved in total by PyTorch)",
    "Tried to allocate 20.00 MiB. GPU 3 has a total capacity of 79.15 GiB of which 6.69 MiB is "
    "free. Process 4118 has 79.13 GiB memory in use.",
    "Tried to allocate 512 bytes (GPU 1; 23.69 GiB total capacity; 22.10 GiB already allocated; "
    "0 bytes free; 22.90 GiB reserved in total by PyTorch)",
])
@pytest.mark.parametrize("cut", [len("RuntimeError: CUDA out o"),
                                 len("RuntimeError: CUDA out of me"), 80])
def test_the_gpu_allocator_out_of_memory_cut_by_a_terminal(tmp_path: Path, tail: str,
                                                          cut: int) -> None:
    line = "RuntimeError: CUDA out of memory. " + tail
    found = top(tmp_path, [*TRACE, line[:cut], line[cut:]])
    assert (found.id, found.severity) == ("out-of-memory", "error")


def test_a_host_allocation_is_not_read_as_the_gpu_allocator(tmp_path: Path) -> None:
    # "you tried to allocate" is the host's allocator: it stays the host's reading
    found = top(tmp_path, [*TRACE, "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. "
                                   "DefaultCPUAllocator: not enough memory: you tried to "
                                   "allocate 1073741824 bytes."])
    assert found.id == "out-of-memory" and "Out of host memory" in found.explanation


def test_the_allocator_words_alone_on_a_line_are_scanned(tmp_path: Path) -> None:
    # no error word, no "memory" on the allocator's line: its own words are the scan's anchor
    found = top(tmp_path, ["| WARNING: CUDA out of me",
                           "mory. Tried to allocate 20.00 MiB. GPU 3 has a total capacity of "
                           "79.15 GiB of which 6.69 MiB is free."])
    assert (found.id, found.severity) == ("out-of-memory", "error")
