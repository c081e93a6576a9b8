"""The EFA/libfabric net plugin (aws-ofi-nccl) failing to register memory is ib-error, worded as
the RDMA network it is. Source of the lines: aws-ofi-nccl v1.19.2 src/ (NCCL_OFI_WARN, printed by
NCCL's logger as "<host>:<pid>:<tid> [<dev>] <function>:<line> NCCL WARN NET/OFI <message>"):
"Unable to register memory (type = %d) for device %d. RC: %zd, Error: %s", "Could not register
memory on rail %u with flag %lu", "Couldn't register memory region with regattr. RC: %d, ERROR:
%s"; libfabric's fi_strerror texts for -EINVAL and -ENOMEM."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

HEAD = "ip-10-1-2-3:2105:2380 [4] {where} NCCL WARN NET/OFI "


@pytest.mark.parametrize(("where", "message"), [
    ("register_rail_mr_buffer:617",
     "Unable to register memory (type = 2) for device 4. RC: -22, Error: Invalid argument"),
    ("reg_internal_mr:902", "Could not register memory on rail 1 with flag 0"),
    ("register_mr_buffers:455",
     "Couldn't register memory region with regattr. RC: -12, ERROR: Cannot allocate memory"),
])
def test_a_plugin_that_cannot_register_memory_is_an_rdma_error(tmp_path: Path, where: str,
                                                               message: str) -> None:
    found = top(tmp_path, [HEAD.format(where=where) + message,
                           "ip-10-1-2-3:2105:2380 [4] NCCL INFO transport/net.cc:695 -> 2"])
    assert (found.id, found.severity) == ("ib-error", "error")
    assert "EFA" in found.explanation and message[:20] in found.explanation


def test_the_plugins_other_lines_are_not_an_rdma_error(tmp_path: Path) -> None:
    found = top(tmp_path, ["ip-10-1-2-3:2105:2105 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl "
                           "1.19.2", "ip-10-1-2-3:2105:2105 [0] NCCL INFO NET/OFI Selected "
                           "provider is efa, fabric is efa-direct (found 4 nics)"])
    assert found.id != "ib-error"


@pytest.mark.parametrize(("release", "where", "message"), [
    # v1.9.2-aws to v1.21.1 src/nccl_ofi_{rdma,sendrecv}: fi_getinfo finding no provider
    ("v1.21.1", "nccl_net_ofi_rdma_init:1474", "OFI fi_getinfo() call failed: No data available"),
    # v1.0.1 to v1.21.1: the fabric provider not opened
    ("v1.6.0", "nccl_net_ofi_init:612",
     "Couldn't open a fabric provider. RC: -61, ERROR: No data available"),
    # v1.19.2 to v1.20.0 src/nccl_ofi_rdma.cpp: a work request's completion with an error
    ("v1.20.0", "rdma_req_handle_error_entry:1210",
     "Request 0x7f2c1c00 seq 17 completed with error. RC: 5. Flags: 0. Error: Input/output "
     "error (113). Completed length: 0, Request: {...}"),
])
def test_the_plugins_catalogued_failures_are_an_rdma_error(tmp_path: Path, release: str,
                                                          where: str, message: str) -> None:
    """The plugin's own messages, read from its releases into the message catalogue, name the
    RDMA network that failed under NCCL's "unhandled system error"."""
    found = top(tmp_path, [HEAD.format(where=where) + message,
                           "ip-10-1-2-3:2105:2380 [4] NCCL INFO transport/net.cc:695 -> 2",
                           "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/"
                           "ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version "
                           "2.18.5"])
    assert (found.id, found.severity) == ("ib-error", "error"), release
