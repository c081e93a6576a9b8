"""GPUDirect RDMA on one end of a connection only (causes/gdr_one_side.py).

The lines are NCCL's for each connection it sets up over the net transport (src/transport/
net.cc: "Channel %02d : %d[%x] -> %d[%x] [send] via NET/%s/%d%s", "[receive]" on the receiving
rank's node, "/GDRDMA" where that end uses GPUDirect RDMA; 2.19 on: "Channel %02d/%d : ..."),
after NCCL's prefix (src/debug.cc: "%s:%d:%d [%d] NCCL INFO ") or without it where a paste
dropped it, with ranks and bus ids of two 8-GPU nodes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

from ddpkit.doctor.log.diagnose import diagnose

CONNECTION = "{prefix}Channel {channel} : {src}[{bus_a}] -> {dst}[{bus_b}] [{side}] via NET/IB/{dev}{gdr}"
PREFIXES = {"gpu-node-02": "gpu-node-02:5359:5371 [1] NCCL INFO ", "gpu-node-01":
            "gpu-node-01:4242:4250 [2] NCCL INFO "}


def connection(side: str, gdr: bool, *, src: int = 9, dst: int = 2, prefix: str = "",
               channel: str = "00/0") -> str:
    return CONNECTION.format(prefix=prefix, channel=channel, src=src, bus_a="1a000", dst=dst,
                             bus_b="6b000", side=side, dev=0 if side == "send" else 1,
                             gdr="/GDRDMA" if gdr else "")


@pytest.mark.parametrize("prefixed", [True, False])
@pytest.mark.parametrize("channel", ["00/0", "01", "31/1"])
def test_a_send_with_gpudirect_and_its_receive_without_is_a_node_difference(
        tmp_path: Path, prefixed: bool, channel: str) -> None:
    lines = [connection("send", True, channel=channel,
                        prefix=PREFIXES["gpu-node-02"] if prefixed else ""),
             connection("receive", False, channel=channel,
                        prefix=PREFIXES["gpu-node-01"] if prefixed else "")]
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("node-mismatch", "warning")
    assert "9 -> 2 uses GPUDirect RDMA where rank 9 sends and not where rank 2 receives" in \
        found.explanation
    assert "nvidia-peermem" in found.fix and len(found.evidence) == 2


@pytest.mark.parametrize(("send", "receive"), [(True, True), (False, False), (False, True)])
def test_both_ends_alike_or_only_the_receive_with_it_is_no_difference(
        tmp_path: Path, send: bool, receive: bool) -> None:
    # a receive with GPUDirect and its send without: a send asks more (GPUDirect reads only on
    # Ampere and later), the same node setup gives it
    found = top(tmp_path, [connection("send", send), connection("receive", receive)])
    assert found.id != "node-mismatch"


def test_one_end_alone_or_other_connections_say_nothing(tmp_path: Path) -> None:
    lines = [connection("send", True), connection("receive", False, src=3, dst=12)]
    assert top(tmp_path, lines).id != "node-mismatch"


def test_in_a_failed_run_the_difference_is_an_error(tmp_path: Path) -> None:
    lines = [connection("send", True), connection("receive", False),
             "RuntimeError: NCCL communicator was aborted on rank 2."]
    found = [f for f in diagnose([str(_write(tmp_path, lines))]) if f.id == "node-mismatch"]
    assert found and found[0].severity == "error"


def test_many_connections_are_bounded_and_the_first_one_sided_is_named(tmp_path: Path) -> None:
    # a large job's connection lines, more than are followed: the one-sided pair seen first is
    # named, the alike ones after it add nothing
    lines = [connection("send", True, src=1, dst=0), connection("receive", False, src=1, dst=0)]
    lines += [connection("send", True, src=r, dst=r + 1) for r in range(2, 6002)]
    lines += [connection("receive", True, src=r, dst=r + 1) for r in range(2, 6002)]
    found = top(tmp_path, lines)
    assert found.id == "node-mismatch" and "connection 1 -> 0 uses" in found.explanation


def _write(tmp_path: Path, lines: list[str]) -> Path:
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    return log
