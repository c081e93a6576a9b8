"""causes/c10d_store_host.py: no agent hosted the c10d rendezvous's store. Lines made from torch's
templates: c10d's socket.cpp ("The client socket has timed out after %dms while trying to connect
to (%s, %d).") and TCPStore.cpp ("TCP client failed to connect/validate to host %s:%d - timed out
(try=%d, timeout=%dms): ..."), torch 1.9-1.12's TCPStore ("connect() timed out. Original timeout
was %d ms."), and elastic/rendezvous/c10d_rendezvous_backend.py's _create_tcp_store, which raises
"RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for
details." from a client's attempt only."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

from ddpkit.doctor.log.diagnose import diagnose

SOCKET = ("[E1207 05:30:49.222996541 socket.cpp:1028] [c10d] The client socket has timed out "
          "after 60000ms while trying to connect to ({host}, {port}).")
TCPSTORE = ("[E1207 05:31:29.249816671 TCPStore.cpp:328] [c10d] TCP client failed to "
            "connect/validate to host {host}:{port} - timed out (try=1, timeout=60000ms): The "
            "client socket has timed out after 60000ms while trying to connect to ({host}, "
            "{port}).")
FRAMES = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/torch/distributed/elastic/rendezvous/'
    'c10d_rendezvous_backend.py", line 254, in create_backend',
    "    store = _create_tcp_store(params)",
    '  File "/usr/lib/python3/dist-packages/torch/distributed/elastic/rendezvous/'
    'c10d_rendezvous_backend.py", line 178, in _create_tcp_store',
    "    raise RendezvousConnectionError(",
]
FAILED = ("torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to "
          "the C10d store has failed. See inner exception for details.")


def agent(host: str, port: int = 29400) -> list[str]:
    return [SOCKET.format(host=host, port=port), TCPSTORE.format(host=host, port=port),
            *FRAMES, FAILED]


@pytest.mark.parametrize("host", ["10.0.0.2", "192.168.1.20", "node-a.cluster"])
def test_an_agent_that_dialled_the_store_in_vain_reads_as_no_host(tmp_path: Path,
                                                                 host: str) -> None:
    found = top(tmp_path, agent(host))
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert f"{host}:29400" in found.explanation and "hosts the store" in found.explanation
    assert "is_host=1" in found.fix and "--local-addr" in found.fix


def test_every_agent_a_client_says_none_hosted(tmp_path: Path) -> None:
    logs = []
    for node in (0, 1):
        log = tmp_path / f"node{node}.log"
        log.write_text("\n".join(agent("10.0.0.2")) + "\n")
        logs.append(str(log))
    found = diagnose(logs)[0]
    assert found.id == "rendezvous-config"
    assert "Each of the 2 agents" in found.explanation


def test_torch_1_x_store_timeout_without_the_endpoint(tmp_path: Path) -> None:
    found = top(tmp_path, ["RuntimeError: connect() timed out. Original timeout was 60000 ms.",
                           "", "The above exception was the direct cause of the following "
                           "exception:", "", *FRAMES, FAILED])
    assert found.id == "rendezvous-config" and "the --rdzv-endpoint" in found.explanation


@pytest.mark.parametrize("lines", [
    # a loopback endpoint: the agent there hosts by itself; the loopback cause's reading
    agent("127.0.0.1"),
    # the endpoint's name does not resolve: another cause
    ["[W socket.cpp:601] [c10d] The hostname of the client socket cannot be retrieved. "
     "err=-2", "TCP client failed to connect/validate to host slinky-0:29400 - Name or service "
     "not known", *FRAMES, FAILED],
    # the error without any dial in vain before it
    [*FRAMES, FAILED],
    # a dial in vain with no rendezvous store error: a script's own TCPStore
    [SOCKET.format(host="10.0.0.2", port=29500)],
])
def test_other_readings_are_left_alone(tmp_path: Path, lines: list[str]) -> None:
    found = top(tmp_path, lines)
    assert "hosts the store" not in found.explanation


def test_torch_1_x_store_timeout_alone_is_a_dial_that_timed_out(tmp_path: Path) -> None:
    # the same line posted without torchrun's agent: the store's client gave up dialling
    found = top(tmp_path, ["RuntimeError: connect() timed out. Original timeout was 1800000 ms."])
    assert found.id == "peer-unreachable" and "timed out" in found.explanation
