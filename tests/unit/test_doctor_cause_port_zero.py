"""causes/port_zero.py: a connection dialled to port 0 is a port never set (rendezvous-config).
Lines from torch's c10d (torch v2.4.0 torch/csrc/distributed/c10d/socket.cpp,
SocketConnectOp::tryConnect: ``C10D_INFO("No socket on ({}, {}) is listening yet, will retry.",
host_, port_)`` on ECONNREFUSED; ``The client socket has failed to connect to [{}]:{} (errno: {} -
{}).``), with torchrun's worker tee (``[default7]:``); what port 0 means: ip(7), bind(2) and
connect(2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

RETRY = ("[I715 22:47:11.296780083 socket.cpp:872] [c10d] No socket on ({host}, {port}) is "
         "listening yet, will retry.")
FAILED = ("[W715 22:47:41.000000000 socket.cpp:462] [c10d] The client socket has failed to connect "
          "to [{host}]:{port} (errno: 111 - Connection refused).")


@pytest.mark.parametrize("line", [RETRY, FAILED, "[default7]:" + RETRY])
@pytest.mark.parametrize("host", ["localhost", "10.0.0.2", "master-0.svc"])
def test_a_dial_to_port_0_is_a_port_never_set(tmp_path: Path, line: str, host: str) -> None:
    found = top(tmp_path, [line.format(host=host, port=0)])
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert "port 0" in found.explanation and host in found.explanation
    assert "--master-port" in found.fix


@pytest.mark.parametrize("port", ["29500", "10", "8000"])
def test_a_dial_to_a_real_port_is_not_read_so(tmp_path: Path, port: str) -> None:
    found = top(tmp_path, [RETRY.format(host="10.0.0.2", port=port)])
    assert "port 0" not in found.explanation
