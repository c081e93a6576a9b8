"""Out of memory on the accelerators other than CUDA, in their own allocators' words: torch's
CUDACachingAllocator message as the other builds print it (ROCm's hipified c10/hip: "HIP out of
memory. Tried to allocate %s. GPU %d has a total capacity of ..."; torch 2.4's XPU caching
allocator: "XPU out of memory. Tried to allocate %s (GPU %d; %s total capacity; ..."; Ascend's
torch_npu NPUCachingAllocator: "NPU out of memory. Tried to allocate %s (NPU %d; %s total
capacity; ..."; torch's MPS allocator: "MPS backend out of memory (MPS allocated: %s, other
allocations: %s, max allowed: %s). Tried to allocate %s on private pool."), and Ascend's runtime
reason "[driver error:out of memory]" (CANN's error_message_manage.cc)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top


@pytest.mark.parametrize("line", [
    "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
    "capacity of 63.98 GiB of which 0 bytes is free.",
    "RuntimeError: XPU out of memory. Tried to allocate 1.00 GiB (GPU 0; 15.11 GiB total "
    "capacity; 14.20 GiB already allocated)",
    "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.97 GiB total "
    "capacity; 58.10 GiB already allocated; 58.10 GiB current active)",
    "RuntimeError: MPS backend out of memory (MPS allocated: 17.00 GB, other allocations: "
    "1.20 GB, max allowed: 18.13 GB). Tried to allocate 256.00 MB on private pool.",
    "        rtGetDevMsg execute failed, reason=[driver error:out of memory]"
    "[FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]",
])
def test_an_accelerators_allocator_out_of_memory(tmp_path: Path, line: str) -> None:
    found = top(tmp_path, ["[rank2]: Traceback (most recent call last):", line])
    assert (found.id, found.severity) == ("out-of-memory", "error")


def test_out_of_memory_in_passing_is_not_read(tmp_path: Path) -> None:
    found = top(tmp_path, ["tip: if you run out of memory, lower the batch size",
                           "epoch 1 done"])
    assert found.id != "out-of-memory"
