"""The NCCL watchdog's timeout line in each torch's format (torch/csrc/distributed/c10d/
ProcessGroupNCCL.cpp, WorkNCCL's operator<< and checkTimeout): torch 1.9-1.10 began at OpType
(1.9 with a TensorShape), 1.11 put "SeqNum=N, " first, 2.x added NumelIn/NumelOut. Each is a
collective timeout with its rank, op and timeout."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

LINES = {
    "1.9": "[E ProcessGroupNCCL.cpp:566] [Rank 3] Watchdog caught collective operation timeout: "
           "WorkNCCL(OpType=BROADCAST, TensorShape=[1], Timeout(ms)=1800000) ran for 1800515 "
           "milliseconds before timing out.",
    "1.10": "[E ProcessGroupNCCL.cpp:587] [Rank 3] Watchdog caught collective operation timeout: "
            "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1803170 milliseconds "
            "before timing out.",
    "2.1": "[E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) "
           "ran for 1800313 milliseconds before timing out.",
}


@pytest.mark.parametrize("version", sorted(LINES))
def test_every_format_is_a_collective_timeout(tmp_path: Path, version: str) -> None:
    found = top(tmp_path, [LINES[version]])
    assert (found.id, found.severity) == ("collective-timeout", "error")
    assert "Rank 3" in found.explanation and "1800000 ms" in found.explanation


# Gloo's tcp transport (gloo/transport/tcp/unbound_buffer.cc, UnboundBuffer::waitRecv/waitSend): on
# an operation's timeout it signals every pair of the context "Application timeout caused pair
# closure" (what the other pending operations raise), then throws GLOO_ERROR_MSG("Timed out
# waiting ", timeout, "ms for recv operation to complete"); torch raises both as RuntimeError.
@pytest.mark.parametrize("lines", [
    ["RuntimeError: Application timeout caused pair closure"],
    ["[rank2]: RuntimeError: Application timeout caused pair closure",
     "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 1800000ms "
     "for recv operation to complete"],
    ["RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:136] Timed out "
     "waiting 1800000ms for send operation to complete"],
])
def test_gloos_operation_timeout_is_a_collective_timeout(tmp_path: Path,
                                                          lines: list[str]) -> None:
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("collective-timeout", "error")
