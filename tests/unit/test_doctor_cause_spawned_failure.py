"""causes/spawned_failure.py: the process of mp.spawn that raised, named by its parent. Lines made
from torch/multiprocessing/spawn.py (ProcessContext.join raising ProcessRaisedException, whose
message is "\\n\\n-- Process %d terminated with the following error:\\n" and the child's traceback)
as CPython prints an exception whose message starts with a line break: "<type>: " alone, a blank
line, then the message's lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top


def _spawn_log(index: int, child_exception: str) -> list[str]:
    return ["Traceback (most recent call last):",
            '  File "train.py", line 40, in <module>',
            "    mp.spawn(main, args=(world,), nprocs=world)",
            '  File "/x/site-packages/torch/multiprocessing/spawn.py", line 211, in join',
            "    raise ProcessRaisedException(msg, error_index, failed_process.pid)",
            "torch.multiprocessing.spawn.ProcessRaisedException: ",
            "",
            f"-- Process {index} terminated with the following error:",
            "Traceback (most recent call last):",
            '  File "/x/site-packages/torch/multiprocessing/spawn.py", line 87, in _wrap',
            "    fn(i, *args)",
            '  File "train.py", line 21, in main',
            "    loss = criterion(out, target)",
            child_exception]


@pytest.mark.parametrize("index", [1, 3, 15])
@pytest.mark.parametrize("exception", [
    "ValueError: Expected input batch_size (16) to match target batch_size (8).",
    "KeyError: 'labels'",
    "AssertionError",
])
def test_the_spawned_process_and_its_own_error_are_named(tmp_path: Path, index: int,
                                                         exception: str) -> None:
    found = top(tmp_path, _spawn_log(index, exception))
    assert (found.id, found.severity) == ("rank-failed", "error")
    assert f"Process {index} of mp.spawn" in found.explanation
    assert exception.rstrip(".") in found.explanation
    assert found.evidence[0].text == exception  # the child's line first, then the parent's
    assert f"process {index} reports" in found.fix


def test_a_specific_cause_in_the_child_says_more(tmp_path: Path) -> None:
    # CUDA's caching allocator's words (c10/cuda/CUDACachingAllocator.cpp)
    found = top(tmp_path, _spawn_log(1, "torch.OutOfMemoryError: CUDA out of memory. Tried to "
                                        "allocate 20.00 MiB. GPU 1 has a total capacity of "
                                        "23.64 GiB of which 3.06 MiB is free."))
    assert found.id == "out-of-memory"


def test_the_parents_report_alone_names_no_process(tmp_path: Path) -> None:
    # the child's traceback cut away: only the parent's exception is there
    found = top(tmp_path, _spawn_log(1, "")[:6])
    assert "of mp.spawn" not in found.explanation
