"""torchrun's rendezvous store on the master address only (issue 32, item 1): node 0 runs torchrun
through ``ddpkit.launch.torchrun.agent --bind``, which hands torch's static rendezvous a socket bound
to that address (``master_listen_fd``, ``bound.py``); torch's own would listen on every interface."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.torchrun import agent, bound
from ddpkit.launch.torchrun.command import AGENT, torchrun_argv


def _config(node_rank: int, nnodes: int = 2) -> LaunchConfig:
    return LaunchConfig(nnodes=nnodes, node_rank=node_rank, master_addr="10.0.0.2",
                        entry="train.py", master_port=29511)


def test_node_0_runs_torchrun_with_its_store_bound_to_the_master_address() -> None:
    argv = torchrun_argv("py", _config(0), local_addr=None, log_dir="/r")
    assert argv[:6] == ["py", "-m", AGENT, "--bind", "10.0.0.2", "--"]
    assert "--master-port=29511" in argv and argv[-1] == "train.py"
    assert torchrun_argv("py", _config(1), local_addr=None, log_dir="/r")[:4] == [
        "py", "-m", AGENT, "--"]  # a client: nothing to bind
    assert torchrun_argv("py", _config(0, nnodes=1), local_addr=None, log_dir="/r")[:4] == [
        "py", "-m", AGENT, "--"]  # one node: its store on every interface, as torchrun's
    assert agent.MODULE == AGENT


def test_only_the_server_for_the_rendezvous_port_gets_the_bound_socket() -> None:
    calls: list[tuple[Any, ...]] = []

    def original(*args: Any, **kwargs: Any) -> str:
        calls.append((args, kwargs))
        return "store"

    store = bound.bound_factory(original, "10.0.0.2", 29511, bind=lambda a, p: 77)
    store("10.0.0.2", 29511, 2, True, 60, multi_tenant=True)  # the static rendezvous' call
    store("10.0.0.2", 29511, 2, False, 60, multi_tenant=True)  # node 1's: a client
    store("10.0.0.2", 40000, 2, True, 60)  # another server
    assert [c[1].get("master_listen_fd") for c in calls] == [77, None, None]
    assert calls[0][1]["multi_tenant"] is True


def test_a_malformed_command_line_is_refused() -> None:
    for argv in (["--nnodes=2"], ["--bind", "10.0.0.2", "--nnodes=2"], ["--bind", "--"], []):
        with pytest.raises(SystemExit):
            agent.split_argv(argv)
    assert agent.split_argv(["--bind", "10.0.0.2", "--", "--nnodes=2"]) == ("10.0.0.2",
                                                                           ["--nnodes=2"])
    assert agent.split_argv(["--", "--nnodes=2", "--"]) == (None, ["--nnodes=2", "--"])


PROBE = """import json, os, socket, sys
port = int(os.environ["MASTER_PORT"])
found = {}
for address in ("127.0.0.1", "127.0.0.2"):
    try:
        socket.create_connection((address, port), timeout=5).close()
        found[address] = "open"
    except OSError as exc:
        found[address] = type(exc).__name__
open(sys.argv[1], "w").write(json.dumps(found))
"""


@pytest.mark.timeout(120)
def test_torchruns_store_listens_on_the_bound_address_only(tcp_port: int, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    result = tmp_path / "found.json"
    proc = subprocess.run(
        [sys.executable, "-m", AGENT, "--bind", "127.0.0.1", "--", "--nnodes=1",
         "--nproc-per-node=1", "--node-rank=0", "--master-addr=127.0.0.1",
         f"--master-port={tcp_port}", "--rdzv-backend=static", "--max-restarts=0", str(probe),
         str(result)], capture_output=True, text=True, timeout=100,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert result.read_text() == '{"127.0.0.1": "open", "127.0.0.2": "ConnectionRefusedError"}'
    with pytest.raises(OSError):  # and the port is free again: nothing left listening
        socket.create_connection(("127.0.0.1", tcp_port), timeout=2).close()
