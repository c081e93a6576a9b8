"""causes/open_mpi_tcp.py: Open MPI's TCP transports saying a peer's address or interface does
not work are wrong-interface (the daemons' own message, a firewall). Sources of the lines:

- Open MPI v5.0.9 and v4.1.8 opal/mca/btl/tcp/help-mpi-btl-tcp.txt, the topics [client connect
  fail] (its "Message:" is btl_tcp_endpoint.c's ``opal_asprintf(&msg, "connect() to %s:%d
  failed", ...)`` and its "Error:" ``strerror(so_error), so_error``), [server accept cannot find
  guid], [dropped inbound connection]; btl_tcp_endpoint.c's ``BTL_ERROR(("received unexpected
  process identifier %s", ...))`` (v4.1.8) under opal's ``[host][[jobid,vpid],rank][file:line:
  function]`` prefix
- Open MPI v4.0.0 orte/mca/oob/tcp/oob_tcp_connection.c: "A process or daemon was unable to
  complete a TCP connection\\nto another process:\\n  Local host:    %s\\n  Remote host:   %s\\n
  This is usually caused by a firewall on the remote host. ..."

Values drawn from the address classes (a container bridge, libvirt's default bridge, a private
address) and the errnos a connect returns.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

DASHES = "-" * 74
CLIENT_CONNECT_FAIL = [
    DASHES,
    "WARNING: Open MPI failed to TCP connect to a peer MPI process.  This",
    "should not happen.",
    "",
    "Your Open MPI job may now hang or fail.",
    "",
    "  Local host: {host}",
    "  PID:        {pid}",
    "  Message:    connect() to {address}:{port} failed",
    "  Error:      {strerror} ({errno})",
    DASHES,
]
CANNOT_FIND_GUID = [
    DASHES,
    "WARNING: Open MPI accepted a TCP connection from what appears to be a",
    "another Open MPI process but cannot find a corresponding process",
    "entry for that peer.",
    "",
    "This attempted connection will be ignored; your MPI job may or may not",
    "continue properly.",
    "",
    "  Local host: {host}",
    "  PID:        {pid}",
    DASHES,
]
DROPPED_INBOUND = [
    "Open MPI detected an inbound MPI TCP connection request from a peer",
    "that appears to be part of this MPI job (i.e., it identified itself as",
    "part of this Open MPI job), but it is from an IP address that is",
    "unexpected.  This is highly unusual.",
    "",
    "  Local host:          {host}",
    "  Local PID:           {pid}",
    "  Peer hostname:       node2 ({address})",
    "  Source IP of socket: {address}",
    "  Known IPs of peer (1):   10.0.1.12",
]
UNEXPECTED_IDENTIFIER = ("[{host}][[22157,1],4][btl_tcp_endpoint.c:625:"
                         "mca_btl_tcp_endpoint_recv_connect_ack] received unexpected process "
                         "identifier [[22157,1],7]")
OOB = [
    DASHES,
    "A process or daemon was unable to complete a TCP connection",
    "to another process:",
    "  Local host:    {host}",
    "  Remote host:   {remote}",
    "This is usually caused by a firewall on the remote host. Please",
    "check that any firewall (e.g., iptables) has been disabled and",
    "try again.",
    DASHES,
]
JOB_END = ["Primary job  terminated normally, but 1 process returned",
           "a non-zero exit code. Per user-direction, the job has been aborted.",
           "mpirun detected that one or more processes exited with non-zero status, thus "
           "causing the job to be terminated. The first process to do so was:",
           "  Process name: [[22157,1],0]",
           "  Exit code:    1"]


def _filled(lines: list[str], **values: object) -> list[str]:
    return [line.format(**values) for line in lines]


@pytest.mark.parametrize(("address", "errno", "strerror", "severity"), [
    # Open MPI's warning, and nothing failed yet (EINPROGRESS is no failure)
    ("172.17.0.1", 115, "Operation now in progress", "warning"),
    # a connect's errno that is a failure
    ("192.168.122.1", 113, "No route to host", "error"),
    ("10.0.1.12", 110, "Connection timed out", "error"),
])
def test_a_failed_tcp_connect_names_the_interface(tmp_path: Path, address: str, errno: int,
                                                  strerror: str, severity: str) -> None:
    found = top(tmp_path, _filled(CLIENT_CONNECT_FAIL, host="node4", pid=9008, address=address,
                                  port=1024, strerror=strerror, errno=errno))
    assert (found.id, found.severity) == ("wrong-interface", severity)
    assert address in found.explanation and "btl_tcp_if_include" in found.fix
    assert any("connect() to" in e.text for e in found.evidence)


def test_a_job_that_then_failed_makes_it_an_error(tmp_path: Path) -> None:
    found = top(tmp_path, _filled(CLIENT_CONNECT_FAIL, host="node4", pid=9008,
                                  address="172.17.0.1", port=1024,
                                  strerror="Connection refused", errno=111) + JOB_END)
    assert (found.id, found.severity) == ("wrong-interface", "error")
    assert "container" in found.explanation


@pytest.mark.parametrize("lines", [
    CANNOT_FIND_GUID, DROPPED_INBOUND, [UNEXPECTED_IDENTIFIER]])
def test_a_connection_from_an_unknown_address_names_the_interface(tmp_path: Path,
                                                                  lines: list[str]) -> None:
    found = top(tmp_path, _filled(lines, host="second-node", pid=4242, address="192.168.122.1"))
    assert found.id == "wrong-interface"
    assert "oob_tcp_if_include" in found.fix


def test_the_daemons_message_names_a_firewall(tmp_path: Path) -> None:
    found = top(tmp_path, _filled(OOB, host="test-openmpi-master",
                                  remote="test-openmpi-worker-14.mpi-test"))
    assert found.id == "firewall"
    assert "security group" in found.fix and "oob_tcp_if_include" in found.fix


def test_other_open_mpi_lines_are_not_this_cause(tmp_path: Path) -> None:
    found = top(tmp_path, ["Process 0 sending 10 to 1, tag 201 (2 processes in ring)",
                           "Process 0 sent to 1", "Process 0 decremented value: 9"])
    assert found.id not in ("wrong-interface", "firewall")
