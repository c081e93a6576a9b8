"""causes/collective_mismatch.py, as Gloo catches a mismatch without torch's debug wrapper: its
TCP pair refuses a message larger than the buffer the receiving collective posted
(gloo/transport/tcp/pair.cc, Pair::prepareRead: GLOO_ENFORCE_LE(op.preamble.length, op.nbytes),
with "Received data size doesn't match expected size. Is there a distributed collective mismatch
in your code?" from 2025-07), printed as GLOO_ENFORCE prints a failed check (gloo/common/
logging.h: "[enforce fail at <file>:<line>] <condition>. <x> vs <y>[. <message>]"), thrown as
gloo::EnforceNotMet out of a thread, so the C++ runtime's terminate handler reports it."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

HEAD = "terminate called after throwing an instance of 'gloo::EnforceNotMet'"
CHECK = ("  what():  [enforce fail at {file}:{line}] op.preamble.length <= op.nbytes. {sent} vs "
         "{expected}")
MESSAGE = (". Received data size doesn't match expected size. Is there a distributed collective "
           "mismatch in your code?")


@pytest.mark.parametrize(("file", "line", "message"), [
    ("../third_party/gloo/gloo/transport/tcp/pair.cc", 446, ""),  # before 2025-07
    ("/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc", 456, MESSAGE),
])
@pytest.mark.parametrize(("sent", "expected"), [(8, 4), (4096, 1024)])
@pytest.mark.parametrize("tag", ["", "[default0]:"])
def test_gloos_size_check_is_a_collective_mismatch(tmp_path: Path, file: str, line: int,
                                                   message: str, sent: int, expected: int,
                                                   tag: str) -> None:
    found = top(tmp_path, [tag + HEAD, tag + CHECK.format(file=file, line=line, sent=sent,
                                                         expected=expected) + message,
                           f"{tag}Aborted (core dumped)"])
    assert (found.id, found.severity) == ("collective-timeout", "error")
    assert f"{sent} vs {expected} bytes" in found.explanation
    assert "different sizes" in found.explanation


def test_another_gloo_check_is_not_one(tmp_path: Path) -> None:
    # pair.cc's bound check of the write offset (GLOO_ENFORCE_LE(roffset + length, size)) is not
    # the receiver's size check
    found = top(tmp_path, [HEAD, "  what():  [enforce fail at ../third_party/gloo/gloo/transport/"
                                 "tcp/pair.cc:426] op.preamble.roffset + op.preamble.length <= "
                                 "op.buf->size_. 16 vs 8"])
    assert "different sizes" not in found.explanation
