"""causes/worker_store_override.py: torchrun's workers dialling a store on their own loopback.
Lines: torch v2.13.0 socket.cpp ("The client socket has timed out after {} while trying to
connect to ({}, {})."; "... has failed to connect to any network address of ({}, {}).", then the
attempt's "... failed to connect to {} (errno: {} - {})."),
TCPStore.cpp ("TCP client failed to connect/validate to host {}:{} - retrying ..."), under
torchrun's tee "[<role><local rank>]:" (elastic/multiprocessing, log_line_prefix_template); the
real run is tests/fixtures/logs/torchrun-sim/tutorial."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

TIMED_OUT = ("[E1207 09:44:24.015444587 socket.cpp:1028] [c10d] The client socket has timed out "
             "after 30000ms while trying to connect to ({host}, {port}).")
# (the summary and the last attempt joined, as the DistNetworkError's what() and TCPStore's retry
# line print them)
REFUSED = ("[W1207 09:44:24.015934027 TCPStore.cpp:340] [c10d] TCP client failed to "
           "connect/validate to host {host}:{port} - retrying (try=0, timeout=30000ms, "
           "delay=377ms): The client socket has failed to connect to any network address of "
           "({host}, {port}). The client socket has failed to connect to [{host}]:{port} (errno: "
           "111 - Connection refused).")


@pytest.mark.parametrize("line", [TIMED_OUT, REFUSED])
@pytest.mark.parametrize(("host", "port"), [("localhost", "12355"), ("127.0.0.1", "29500")])
@pytest.mark.parametrize("tee", ["[default0]:", "[trainer3]:"])
def test_a_worker_dialling_its_own_loopback_store_was_given_another(
        tmp_path: Path, line: str, host: str, port: str, tee: str) -> None:
    found = top(tmp_path, [tee + line.format(host=host, port=port)] * 3)
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert f"{host}:{port}" in found.explanation and "MASTER_ADDR" in found.fix


@pytest.mark.parametrize("prefix", ["", "[rank1]:", "[node1:0]: "])
def test_another_process_dialling_loopback_is_not_this(tmp_path: Path, prefix: str) -> None:
    # (torchrun's agent itself, any launcher's "[rank1]:", DeepSpeed's "[node1:0]")
    found = top(tmp_path, [prefix + TIMED_OUT.format(host="127.0.0.1", port="29500")] * 3)
    assert "torchrun's workers dialled" not in found.explanation


def test_a_worker_that_could_not_take_a_local_address_is_not_this(tmp_path: Path) -> None:
    # (errno 99, EADDRNOTAVAIL: the client's own failure, not a store no one served)
    found = top(tmp_path, ["[default0]:[W820 18:57:52.292435752 socket.cpp:764] [c10d] The client "
                           "socket has failed to connect to [localhost]:33649 (errno: 99 - Cannot "
                           "assign requested address)."] * 3)
    assert "torchrun's workers dialled" not in found.explanation


def test_a_worker_dialling_another_machine_is_not_this(tmp_path: Path) -> None:
    found = top(tmp_path, ["[default0]:" + TIMED_OUT.format(host="10.0.0.2", port="29500")] * 3)
    assert "torchrun's workers dialled" not in found.explanation
