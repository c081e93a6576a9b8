"""Gloo failures produced for real on a 2-node sim, and what ``doctor --log`` makes of them.

Each live case runs plain ``python -m torch.distributed.run`` on both nodes (static rendezvous on
node 0's eth1 address) with a tiny Gloo all_reduce worker, bounded from outside: once one node has
exited, the others get a grace period, then SIGTERM (torchrun stops its workers and says so),
then SIGKILL of the whole tree. Both nodes' output is diagnosed together. The ``sim_cluster``
fixture proves that no process or namespace is left. ``REFRESH_DOCTOR_CAPTURES=1`` rewrites the
fixtures under tests/fixtures/logs/captured/ that the fixture tests at the bottom read (those need
neither root nor torch).

- ``sim_gloo_wrong_interface_node{0,1}.log``: no interface variable; every hostname resolves to
  the shared eth0 172.17.0.4, so Gloo advertises it; one node (whichever dials first: it varies
  from run to run) is refused by 172.17.0.4 and gives up, the other hangs until stopped.
- ``sim_gloo_ifname_missing_node{0,1}.log``: ``GLOO_SOCKET_IFNAME=eth1`` on both nodes, but
  node 1's private NIC is called ens5; node 1 fails at once, node 0 waits out its timeout.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from multinode import kill_tree

from ddpkit.sim.topology import SimCluster, node_argv

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "captured"
FIRST_EXIT_S = 60.0  # the first node must end by itself within this
GRACE_S = 12.0  # then the others get this long before SIGTERM (the worker's timeout is 10 s)
TERM_S = 10.0  # and this long after SIGTERM before SIGKILL

WORKER = r'''
from datetime import timedelta
import torch
import torch.distributed as dist
dist.init_process_group("gloo", timeout=timedelta(seconds=10))
tensor = torch.ones(4)
dist.all_reduce(tensor)
print(f"rank {dist.get_rank()}: all_reduce ok {tensor.tolist()}", flush=True)
dist.destroy_process_group()
'''


def _clean_env() -> dict[str, str]:
    prefixes = ("NCCL_", "GLOO_", "TORCH_", "PET_", "MASTER_", "DDPKIT_", "RANK", "WORLD_SIZE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    return {**env, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}


def run_torchrun(cluster: SimCluster, workdir: Path, extra_env: Sequence[str] = (), *,
                 grace_s: float = GRACE_S) -> tuple[list[str], list[int | None]]:
    """Both nodes' combined output and exit codes (None: stopped from outside)."""
    script = workdir / "allreduce.py"
    script.write_text(WORKER)
    master = cluster.node(0).private_address
    procs = []
    for index in range(len(cluster.nodes)):
        argv = ["env", *extra_env, sys.executable, "-m", "torch.distributed.run", "--nnodes",
                str(len(cluster.nodes)), "--node-rank", str(index), "--nproc-per-node", "1",
                "--master-addr", master, "--master-port", "29611", str(script)]
        procs.append(subprocess.Popen(node_argv(cluster, index, argv), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, cwd=workdir, env=_clean_env(),
                                      start_new_session=True))
    outputs = [b""] * len(procs)
    stopped = [False] * len(procs)

    def read(i: int) -> None:
        stream = procs[i].stdout
        assert stream is not None
        outputs[i] = stream.read()

    readers = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(len(procs))]
    for reader in readers:
        reader.start()
    try:
        deadline = time.monotonic() + FIRST_EXIT_S
        while all(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert any(p.poll() is not None for p in procs), "no node failed by itself"
        grace = time.monotonic() + grace_s
        while any(p.poll() is None for p in procs) and time.monotonic() < grace:
            time.sleep(0.2)
        for i, proc in enumerate(procs):
            if proc.poll() is None:
                stopped[i] = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        term = time.monotonic() + TERM_S
        while any(p.poll() is None for p in procs) and time.monotonic() < term:
            time.sleep(0.2)
    finally:
        for proc in procs:
            if proc.poll() is None:
                kill_tree(proc.pid)
            proc.wait(timeout=30)
        for reader in readers:
            reader.join(timeout=30)
    texts = [out.decode("utf-8", "replace").replace(str(workdir), "/tmp/capture")
             for out in outputs]
    return texts, [None if stopped[i] else p.returncode for i, p in enumerate(procs)]


def diagnose(tmp_path: Path, name: str, texts: Sequence[str]) -> list[dict[str, Any]]:
    """``doctor --log`` over every node's log (written as <name>_node<i>.log)."""
    paths = []
    for index, text in enumerate(texts):
        path = tmp_path / f"{name}_node{index}.log"
        path.write_text(text)
        paths.append(str(path))
        if os.environ.get("REFRESH_DOCTOR_CAPTURES") == "1":
            (CAPTURED / path.name).write_text(text)
    return diagnose_files(paths)


def diagnose_files(paths: Sequence[str]) -> list[dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", "ddpkit", "doctor", "--log", *paths, "--json"],
                          capture_output=True, text=True, timeout=60, env=_clean_env())
    assert proc.returncode == 1, proc.stdout + proc.stderr
    findings: list[dict[str, Any]] = json.loads(proc.stdout)["findings"]
    return findings


def refused_node(texts: Sequence[str]) -> int:
    """The node that was refused by 172.17.0.4 (the other one hung)."""
    (index,) = [i for i, text in enumerate(texts) if "remote=[172.17.0.4]" in text]
    return index


def assert_wrong_interface(findings: list[dict[str, Any]], refused: int) -> None:
    top = findings[0]
    assert top["id"] == "wrong-interface", [f["id"] for f in findings]
    assert "172.17.0.4" in top["explanation"]
    assert "GLOO_SOCKET_IFNAME=eth1" in top["fix"] and "NCCL_SOCKET_IFNAME==eth1" in top["fix"]
    assert any(e["file"].endswith(f"node{refused}.log") and "Connection refused" in e["text"]
               for e in top["evidence"])


def assert_ifname_missing(findings: list[dict[str, Any]]) -> None:
    top = findings[0]
    assert top["id"] == "interface-not-found", [f["id"] for f in findings]
    assert "'eth1'" in top["explanation"]
    assert any(e["file"].endswith("node1.log") and "Unable to find address for: eth1" in e["text"]
               for e in top["evidence"])


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_gloo_without_interface_variable_on_two_nodes(
        sim_cluster: Callable[..., SimCluster], tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    texts, codes = run_torchrun(cluster, tmp_path, grace_s=3.0)  # the other one hangs for good
    refused = refused_node(texts)
    assert codes[refused] not in (0, None), texts[refused]  # it gave up by itself
    assert codes[1 - refused] is None, texts[1 - refused]  # the other hung: stopped from outside
    assert_wrong_interface(diagnose(tmp_path, "sim_gloo_wrong_interface", texts), refused)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_gloo_interface_name_missing_on_one_node(
        sim_cluster: Callable[..., SimCluster], tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2, ifnames={1: "ens5"})
    texts, codes = run_torchrun(cluster, tmp_path, ["GLOO_SOCKET_IFNAME=eth1"])
    assert codes[1] not in (0, None), texts[1]
    assert_ifname_missing(diagnose(tmp_path, "sim_gloo_ifname_missing", texts))


# -- the saved captures (no root, no torch) ------------------------------------------------------


def _captured(name: str) -> list[str]:
    paths = [str(CAPTURED / f"{name}_node{i}.log") for i in range(2)]
    assert all(Path(p).stat().st_size < 16_000 for p in paths)  # fixtures stay small
    return paths


def test_captured_gloo_wrong_interface_is_diagnosed() -> None:
    paths = _captured("sim_gloo_wrong_interface")
    refused = refused_node([Path(p).read_text() for p in paths])
    assert_wrong_interface(diagnose_files(paths), refused)


def test_captured_gloo_ifname_missing_is_diagnosed() -> None:
    assert_ifname_missing(diagnose_files(_captured("sim_gloo_ifname_missing")))


def test_captured_hung_node_alone_is_not_called_wrong_interface() -> None:
    """The hung node of the wrong-interface run shows no refused address: alone, its log is no
    evidence of one, and doctor must not claim it."""
    paths = _captured("sim_gloo_wrong_interface")
    hung = paths[1 - refused_node([Path(p).read_text() for p in paths])]
    proc = subprocess.run([sys.executable, "-m", "ddpkit", "doctor", "--log", hung, "--json"],
                          capture_output=True, text=True, timeout=60, env=_clean_env())
    ids = [f["id"] for f in json.loads(proc.stdout)["findings"]]
    assert "wrong-interface" not in ids, ids
