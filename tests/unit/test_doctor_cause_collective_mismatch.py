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


# fairseq's all_gather_list on data it cannot read (fairseq/distributed/utils.py; fairseq/
# distributed_utils.py before 0.10): "Unable to unpickle data from other workers.
# all_gather_list requires all workers to enter the function together, so this error usually
# indicates that the workers have fallen out of sync somehow. Workers can fall out of sync if one
# of them runs out of memory, or if there are other conditions in your training script that can
# cause one worker to finish an epoch while other workers are still iterating over their portions
# of the data. Try rerunning with --ddp-backend=legacy_ddp and --find-unused-parameters."
FAIRSEQ = ("Unable to unpickle data from other workers. all_gather_list requires all workers to "
           "enter the function together, so this error usually indicates that the workers have "
           "fallen out of sync somehow. Workers can fall out of sync if one of them runs out of "
           "memory, or if there are other conditions in your training script that can cause one "
           "worker to finish an epoch while other workers are still iterating over their "
           "portions of the data. Try rerunning with --ddp-backend=legacy_ddp and "
           "--find-unused-parameters.")


@pytest.mark.parametrize("path", ["fairseq/distributed/utils.py", "fairseq/distributed_utils.py"])
@pytest.mark.parametrize("raised", ["Exception", "RuntimeError"])
def test_a_programs_own_collective_finding_the_ranks_out_of_step(tmp_path: Path, path: str,
                                                                 raised: str) -> None:
    lines = ["Traceback (most recent call last):",
             f'  File "/opt/conda/lib/python3.8/site-packages/{path}", line 178, in '
             "all_gather_list", "    raise Exception(", f"{raised}: {FAIRSEQ}"]
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("collective-timeout", "error")
    assert "(all_gather_list) found that the ranks did not enter it together" in \
        found.explanation
    assert "out of memory" in found.fix and "fingerprints" not in found.fix


def test_out_of_sync_words_of_something_else_are_no_mismatch(tmp_path: Path) -> None:
    # a clock, a mirror, a progress bar: other things fall out of sync
    lines = ["WARNING: system clock is out of sync by 3s", "RuntimeError: mirrors out of sync"]
    assert "out of step" not in top(tmp_path, lines).explanation
