"""The NCCL watchdog's timeout as threads post it: its words without the "[Rank N]" head or the
WorkNCCL, its stack frame as a copy gives it, a WorkNCCL a timeout is said of in other words;
and torchelastic's lost c10d store without its exception's class. Sources of the lines:

- torch v2.1.0 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, WorkNCCL::checkTimeout:
  "[Rank " << rank_ << "] Watchdog caught collective operation timeout: " << *this << " ran for
  " ... (a WorkNCCL prints "WorkNCCL(SeqNum=%d, OpType=%s, NumelIn=%d, NumelOut=%d,
  Timeout(ms)=%d)"); c10's backtrace "Exception raised from checkTimeout at
  .../ProcessGroupNCCL.cpp:%d"
- torch v2.1.0 torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py,
  _create_tcp_store: ``raise RendezvousConnectionError("The connection to the C10d store has
  failed. See inner exception for details.")``
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top


@pytest.mark.parametrize("lines", [
    ["Watchdog caught collective operation timeout", "checkTimeout at ProcessGroupNCCL.cpp:733"],
    ["Watchdog caught collective operation timeout: WorkNCCL ran for 600036 milliseconds"],
    ["NCCL collective timeout: WorkNCCL(SeqNum=16, OpType=COALESCED, NumelIn=0, NumelOut=0)"],
    ["frame #3: checkTimeout at /opt/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:565"],
])
def test_the_watchdogs_timeout_in_a_threads_words(tmp_path: Path, lines: list[str]) -> None:
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("collective-timeout", "error")


def test_a_worknccl_without_a_timeout_is_not_one(tmp_path: Path) -> None:
    found = top(tmp_path, ["queued WorkNCCL(SeqNum=16, OpType=ALLREDUCE, NumelIn=4, NumelOut=4)"])
    assert found.id != "collective-timeout"


def test_the_lost_c10d_store_without_its_class(tmp_path: Path) -> None:
    found = top(tmp_path, ["The connection to the C10d store has failed. See inner exception for "
                           "details."])
    assert (found.id, found.severity) == ("peer-unreachable", "error")
