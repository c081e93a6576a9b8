"""causes/store_without_libuv.py: torch's TCPStore asked for libuv by a build without it is
invalid-usage (a setting torch refused, as the message catalogue files it). Source of the line:
torch/csrc/distributed/c10d/TCPStore.cpp (2.4 on; the stored version the message catalogue read),
``C10D_THROW_ERROR(DistStoreError, "use_libuv was requested but PyTorch was build without libuv
support, run with USE_LIBUV=0 to disable it.")`` ("build", as torch words it; "built" is read too),
raised in torchrun's or init_process_group's store creation (torch/distributed/rendezvous.py
_create_c10d_store)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

MESSAGE = ("use_libuv was requested but PyTorch was {word} without libuv support, run with "
           "USE_LIBUV=0 to disable it.")


@pytest.mark.parametrize("word", ["build", "built"])
@pytest.mark.parametrize("head", ["torch.distributed.DistStoreError: ", "[rank0]: "
                                  "torch.distributed.DistStoreError: "])
def test_a_store_without_libuv_is_invalid_usage(tmp_path: Path, head: str, word: str) -> None:
    found = top(tmp_path, [
        "Traceback (most recent call last):",
        '  File "C:\\Python311\\Lib\\site-packages\\torch\\distributed\\rendezvous.py", line 189,'
        " in _create_c10d_store",
        "    return TCPStore(",
        head + MESSAGE.format(word=word)])
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert "USE_LIBUV=0" in found.fix


def test_a_traceback_pasted_onto_one_line_is_read(tmp_path: Path) -> None:
    """A traceback quoted inline, its newlines lost: the frame (CPython's '", line N, in F'), its
    source line and the exception run together; the exception still ends a traceback."""
    found = top(tmp_path, ['"C:\\venv\\lib\\site-packages\\torch\\distributed\\rendezvous.py", '
                           "line 185, in _create_c10d_store return TCPStore(RuntimeError: "
                           + MESSAGE.format(word="build")])
    assert (found.id, found.severity) == ("invalid-usage", "error")


def test_the_variable_alone_is_not_this_cause(tmp_path: Path) -> None:
    found = top(tmp_path, ["USE_LIBUV=0 set in the environment", "training started"])
    assert found.id != "invalid-usage"
