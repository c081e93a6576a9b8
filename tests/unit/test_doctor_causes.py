"""The causes that reason from facts (doctor/log/causes/): one test per cause, each log made of
the printing programs' templates (NCCL's, Gloo's, torch's message catalogue) with values drawn
from the fact classes, not copied from a thread."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose

# torch/csrc/distributed/c10d/socket.cpp's templates
C10D_CONNECT = ("[W socket.cpp:663] [c10d] The client socket has failed to connect to [{addr}]:"
                "{port} (errno: {errno} - {text}).")
C10D_TIMEOUT = ("torch.distributed.DistNetworkError: The client socket has timed out after 1800s "
                "while trying to connect to ({addr}, {port}).")
C10D_BIND = ("[W socket.cpp:436] [c10d] The server socket has failed to bind to {addr}:{port} "
             "(errno: 98 - Address already in use).")
C10D_LISTEN = "[E socket.cpp:472] [c10d] The server socket has failed to listen on any local " \
              "network address."
NCCL = "{host}:{pid}:{pid} [0] NCCL {level} {text}"


def top(tmp_path: Path, lines: list[str]) -> Finding:
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose([str(log)])[0]


@pytest.mark.parametrize("addr", ["127.0.1.1", "localhost", "::1", "127.0.0.1"])
def test_loopback_in_a_multi_machine_job(tmp_path: Path, addr: str) -> None:
    found = top(tmp_path, [  # torchrun's launch configs (launcher/api.py), one value per line
        "INFO:torch.distributed.launcher.api:Starting elastic_operator with launch configs:",
        "  entrypoint       : train.py", "  min_nodes        : 2", "  max_nodes        : 2",
        C10D_CONNECT.format(addr=addr, port=29500, errno=111, text="Connection refused"),
        C10D_TIMEOUT.format(addr=addr, port=29500),
    ])
    assert (found.id, found.severity) == ("wrong-interface", "error")
    assert addr in found.explanation and "/etc/hosts" in found.fix
    assert "nics --to 127" not in found.fix and "nics --to ::1" not in found.fix


def test_nccl_bootstrap_on_lo_across_hosts(tmp_path: Path) -> None:
    found = top(tmp_path, [
        NCCL.format(host="node-a", pid=11, level="INFO", text="Bootstrap : Using lo:127.0.0.1<0>"),
        NCCL.format(host="node-b", pid=12, level="INFO", text="Bootstrap : Using lo:127.0.0.1<0>"),
        NCCL.format(host="node-b", pid=12, level="WARN",
                    text="Net : Connect to 127.0.0.1<43215> failed : Connection refused"),
    ])
    assert found.id == "wrong-interface" and found.id != "container-network"
    assert "nics --to 127" not in found.fix


def test_loopback_on_one_machine_is_no_such_finding(tmp_path: Path) -> None:
    found = top(tmp_path, [
        C10D_CONNECT.format(addr="127.0.0.1", port=29500, errno=111, text="Connection refused"),
        C10D_TIMEOUT.format(addr="127.0.0.1", port=29500)])
    assert found.id != "wrong-interface" or "loopback address (" not in found.explanation
    # a route to this machine's own loopback always exists: checking it is no advice
    assert "nics --to 127" not in found.fix and "own loopback" in found.fix


# a traceback through torchrun's static rendezvous (torch/distributed/elastic/rendezvous/
# static_tcp_rendezvous.py, next_rendezvous), where node rank 0's agent serves the store and
# every other agent is its client
STATIC_FRAMES = [
    "Traceback (most recent call last):",
    '  File "/opt/venv/lib/python3.12/site-packages/torch/distributed/elastic/rendezvous/'
    'static_tcp_rendezvous.py", line 67, in next_rendezvous',
    "    self._store = TCPStore(  # type: ignore[call-arg]",
]


@pytest.mark.parametrize("addr", ["127.0.0.1", "127.0.1.1", "localhost"])
def test_a_static_rendezvous_client_dialling_loopback_spans_machines(tmp_path: Path,
                                                                     addr: str) -> None:
    # one node's log, no node count in it: a client of the static store is node rank 1 or more
    found = top(tmp_path, [
        C10D_CONNECT.format(addr=addr, port=29500, errno=111, text="Connection refused"),
        *STATIC_FRAMES, C10D_TIMEOUT.format(addr=addr, port=29500)])
    assert (found.id, found.severity) == ("wrong-interface", "error")
    assert "static rendezvous as a client" in found.explanation and addr in found.explanation
    assert "nics --to 127" not in found.fix


def test_a_loopback_dial_outside_the_static_rendezvous_is_not_read_as_a_client(
        tmp_path: Path) -> None:
    # the same dial from a script's own init_process_group (no torchrun store in its traceback)
    found = top(tmp_path, [
        C10D_CONNECT.format(addr="127.0.0.1", port=29500, errno=111, text="Connection refused"),
        "Traceback (most recent call last):",
        '  File "/opt/venv/lib/python3.12/site-packages/torch/distributed/rendezvous.py", '
        "line 189, in _create_c10d_store",
        C10D_TIMEOUT.format(addr="127.0.0.1", port=29500)])
    assert "as a client" not in found.explanation


@pytest.mark.parametrize("tail", [
    [C10D_LISTEN],
    ["[E1204 09:50:12.118000 123 torch/csrc/distributed/c10d/socket.cpp:462] [c10d] The server "
     "socket has failed to listen on any local network address. port: 29500, useIpv6: 0, "
     "code: -98, name: EADDRINUSE, message: address already in use"],
])
def test_bind_errno_98_then_listen_failure(tmp_path: Path, tail: list[str]) -> None:
    head = [C10D_BIND.format(addr="[::]", port=29500), C10D_BIND.format(addr="0.0.0.0", port=29500)]
    found = top(tmp_path, (head if tail == [C10D_LISTEN] else []) + tail)
    assert (found.id, found.severity) == ("port-in-use", "error")


def test_c10d_error_line_is_never_no_failure(tmp_path: Path) -> None:
    found = top(tmp_path, [C10D_LISTEN])
    assert found.id != "no-failure" and found.severity == "error"


@pytest.mark.parametrize("warning", ["Failed to open libibverbs.so[.1]", "NET/IB : No device found."])
def test_no_infiniband_warning_in_a_cut_log_is_no_error(tmp_path: Path, warning: str) -> None:
    found = top(tmp_path, [
        NCCL.format(host="n1", pid=5, level="INFO", text="Bootstrap : Using eth0:10.0.0.2<0>"),
        NCCL.format(host="n1", pid=5, level="WARN", text=warning),
        NCCL.format(host="n1", pid=5, level="INFO", text="NET/Socket : Using [0]eth0:10.0.0.2<0>"),
    ])
    assert found.severity != "error" and found.id != "ib-error"


def test_store_barrier_counting_more_workers_than_the_world(tmp_path: Path) -> None:
    key = "store_based_barrier_key:1"
    found = top(tmp_path, [
        f"Waiting in store based barrier to initialize process group for rank: 0, key: {key} "
        "(world_size=2, worker_count=3, timeout=0:30:00)",
    ] * 3 + [
        f"RuntimeError: Timed out initializing process group in store based barrier on rank: 0, "
        f"for key: {key} (world_size=2, worker_count=3, timeout=0:30:00)"])
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert "store" in found.explanation and "3 workers in a world of 2" in found.explanation


# Gloo's tcp/debug_logger.cc and ProcessGroupGloo.cpp's lines for a refused connect ("ERROR failed
# to connect, willRetry=%d, retry=%d, retryLimit=%d, rank=%d, size=%d, local=%s, remote=%s,
# error=%s"; "Gloo connectFullMesh failed with [...pair.cc:%d] timed out connecting: SO_ERROR:
# Connection refused, remote=%s"), after a script's init_process_group with a file:// init_method
GLOO_REFUSED = [
    "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/debug_logger.cc:9] ERROR failed "
    "to connect, willRetry=0, retry=4, retryLimit=3, rank=0, size=2, local=[{addr}]:31933, "
    "remote=[{addr}]:15285$0, error=SO_ERROR: Connection refused, remote=[{addr}]:15285$0",
    "RuntimeError: Gloo connectFullMesh failed with [/__w/pytorch/pytorch/third_party/gloo/gloo/"
    "transport/tcp/pair.cc:152] timed out connecting: SO_ERROR: Connection refused, "
    "remote=[{addr}]:15285$0",
]


@pytest.mark.parametrize("init", [
    '    dist.init_process_group("gloo", init_method="file:///tmp/run7/store", rank=rank,',
    "    dist.init_process_group(backend='gloo', init_method='file://' + args.store,",
    "Namespace(dist_backend='gloo', dist_url='file:///scratch/u/sharedfile', world_size=2)",
])
def test_a_reused_file_store_sends_gloo_to_an_earlier_runs_port(tmp_path: Path,
                                                                 init: str) -> None:
    found = top(tmp_path, ["Traceback (most recent call last):",
                           '  File "train.py", line 12, in <module>', init,
                           *(line.format(addr="127.0.0.1") for line in GLOO_REFUSED)])
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert "FileStore (file://" in found.explanation and "earlier run" in found.explanation
    assert "15285" not in found.explanation  # (Gloo prints its ports byte-swapped)


def test_gloo_refused_on_one_machine_without_a_file_store_is_not_a_stale_store(
        tmp_path: Path) -> None:
    found = top(tmp_path, [line.format(addr="127.0.0.1") for line in GLOO_REFUSED])
    assert "FileStore" not in found.explanation


def test_rendezvous_endpoint_without_a_port(tmp_path: Path) -> None:
    found = top(tmp_path, [
        "INFO:torch.distributed.launcher.api:Starting elastic_operator with launch configs:",
        "  entrypoint       : train.py", "  min_nodes        : 2", "  max_nodes        : 2",
        "  nproc_per_node   : 8", "  run_id           : 7", "  rdzv_backend     : c10d",
        "  rdzv_endpoint    : 10.0.0.2",
        C10D_CONNECT.format(addr="10.0.0.2", port=29400, errno=111, text="Connection refused"),
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to "
        "the C10d store has failed. See inner exception for details."])
    assert found.id == "rendezvous-config" and "10.0.0.2" in found.explanation
    assert "29400" in found.explanation


def test_empty_address_after_an_ifname_matching_nothing(tmp_path: Path) -> None:
    found = top(tmp_path, [
        NCCL.format(host="n1", pid=7, level="INFO", text="NCCL_SOCKET_IFNAME set by environment "
                    "to ens9f9"),
        NCCL.format(host="n1", pid=7, level="WARN", text="Net : connecting to address  with "
                    "family 0 is neither AF_INET(2) nor AF_INET6(10)"),
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, internal error, NCCL version "
        "2.14.3"])
    assert (found.id, found.severity) == ("interface-not-found", "error")
    assert "ens9f9" in found.explanation


@pytest.mark.parametrize(("line", "expected"), [
    ("[default] Worker group FAILED. {left}/3 attempts left; will restart worker group",
     "rank-failed"),
    ("[default] Detected 1 new nodes from group_rank=0; will restart worker group",
     "rendezvous-config"),
])
def test_rendezvous_formed_again_and_again(tmp_path: Path, line: str, expected: str) -> None:
    lines = []
    for left in (2, 1, 0):
        lines.append(line.format(left=left))
        lines.append("[default] Starting worker group")
    found = top(tmp_path, lines)
    assert found.id == expected and found.id != "no-failure"


def test_docker_bridge_on_every_node(tmp_path: Path) -> None:
    found = top(tmp_path, [
        NCCL.format(host="node-a", pid=3, level="INFO", text="Bootstrap : Using eth0:172.17.0.2<0>"),
        NCCL.format(host="node-b", pid=4, level="INFO", text="Bootstrap : Using eth0:172.17.0.3<0>"),
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL "
        "version 2.14.3"])
    assert (found.id, found.severity) == ("container-network", "error")


def test_rendezvous_result_naming_debian_hostname_address(tmp_path: Path) -> None:
    # agent/server/api.py's "Rendezvous complete for workers. Result:" block, one value a line
    found = top(tmp_path, [
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for "
        "workers. Result:", "  restart_count=0", "  master_addr=127.0.1.1", "  master_port=29500",
        "  group_rank=1", "  group_world_size=2", "  local_ranks=[0]",
        C10D_TIMEOUT.format(addr="127.0.1.1", port=29500)])
    assert found.id == "wrong-interface" and "Debian" in found.explanation


def test_another_programs_loopback_error_is_no_network_finding(tmp_path: Path) -> None:
    found = top(tmp_path, [
        "INFO:torch.distributed.launcher.api:Starting elastic_operator with launch configs:",
        "  entrypoint       : train.py", "  min_nodes        : 2", "  max_nodes        : 2",
        "requests.exceptions.ConnectionError: HTTPConnectionPool(host='localhost', port=8080): "
        "Max retries exceeded (Caused by NewConnectionError: [Errno 111] Connection refused)"])
    assert found.id != "wrong-interface"


def test_a_bridge_beside_another_failure_is_only_a_warning(tmp_path: Path) -> None:
    # two containers on Docker's bridge, and a rank that ran out of memory: the bridge did not
    # fail the job
    found = diagnose_all(tmp_path, [
        NCCL.format(host="node-a", pid=3, level="INFO", text="Bootstrap : Using eth0:172.17.0.2<0>"),
        NCCL.format(host="node-b", pid=4, level="INFO", text="Bootstrap : Using eth0:172.17.0.3<0>"),
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"])
    assert found[0].id == "out-of-memory"
    assert all(f.severity == "warning" for f in found if f.id == "container-network")


def diagnose_all(tmp_path: Path, lines: list[str]) -> list[Finding]:
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose([str(log)])


@pytest.mark.parametrize("after", ["60s", "1800s", "1800000ms"])
def test_c10d_connect_timeout_names_the_address_whatever_the_duration_unit(
        tmp_path: Path, after: str) -> None:
    # socket.cpp's "The client socket has timed out after {} while trying to connect to ({}, {})."
    # formats a std::chrono duration with fmt, which writes the unit; every real copy in the
    # corpus says seconds. Beside a watchdog's timeout (ProcessGroupNCCL.cpp's template) on a
    # job of two machines, the container bridge it dialled is the cause, not the timeout
    line = C10D_TIMEOUT.replace("1800s", after).format(addr="172.17.0.2", port=44737)
    found = top(tmp_path, [
        f"(RayWorker pid=207931, ip=10.0.1.75) [E socket.cpp:922] [c10d] {line.split(': ', 1)[1]}",
        "(Actor pid=207260, ip=10.0.1.76) [E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=3856, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=1800000) ran for 1800268 milliseconds before timing out."])
    assert (found.id, found.severity) == ("wrong-interface", "error")
    assert "172.17.0.2" in found.explanation
