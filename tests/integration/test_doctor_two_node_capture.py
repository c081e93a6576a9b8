"""Two torchrun "nodes" on loopback (issue 24): what each node's own log says, live.

Each case starts two ``python -m torch.distributed.run --nnodes 2`` processes on 127.0.0.1 with a
tiny Gloo worker, stops or lets them fail, and diagnoses each node's output alone, as a user
looking at one node would. It proves no process of the run is left behind.
``REFRESH_DOCTOR_CAPTURES=1`` rewrites tests/fixtures/logs/captured/i24_torchrun_*.log (the unit
tests in tests/unit/test_doctor_unexplained.py read those).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ddpkit.doctor.log.diagnose import diagnose
from ports import free_port

pytestmark = pytest.mark.slow

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "captured"
OUTER_TIMEOUT = 120

WORKER = r'''
import sys, time
from datetime import timedelta
import torch
import torch.distributed as dist

mode = sys.argv[1]
dist.init_process_group("gloo", timeout=timedelta(seconds=60))
rank = dist.get_rank()
print(f"rank {rank} initialised", flush=True)
open("initialised", "a").write(f"{rank}\n")  # for the test: the output goes to a pipe
if rank == 1 and mode == "wait":
    time.sleep(600)  # never joins the all_reduce: rank 0 waits in it
if rank == 1 and mode == "fail":
    raise ValueError("bad value in batch 3")
tensor = torch.ones(4)
dist.all_reduce(tensor)
print(f"rank {rank} sum {tensor.tolist()}", flush=True)
dist.destroy_process_group()
'''


def _env() -> dict[str, str]:
    prefixes = ("NCCL_", "GLOO_", "TORCH_", "PET_", "MASTER_", "DDPKIT_", "RANK", "WORLD_SIZE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    return {**env, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}




def _start(workdir: Path, node: int, port: int, mode: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank",
            str(node), "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port",
            str(port), str(workdir / "worker.py"), mode]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=workdir,
                            env=_env(), start_new_session=True)


def _finish(proc: subprocess.Popen[bytes], workdir: Path) -> str:
    try:
        out, _ = proc.communicate(timeout=OUTER_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    finally:
        _assert_group_gone(proc.pid)
    return out.decode("utf-8", "replace").replace(str(workdir), "/tmp/capture")


def _assert_group_gone(pgid: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        left = []
        for p in psutil.process_iter(["pid"]):
            try:
                if os.getpgid(p.pid) == pgid:
                    left.append(p)
            except (ProcessLookupError, psutil.NoSuchProcess):
                continue
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for process in left:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    assert not left, f"processes left behind: {[p.pid for p in left]}"


def _wait_for(path: Path, text: str, timeout: float = 90) -> None:
    """Until the file at ``path`` holds ``text``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.5)
    pytest.fail(f"{text!r} never appeared")


def _diagnose(tmp_path: Path, name: str, text: str) -> list[str]:
    log = tmp_path / f"{name}.log"
    log.write_text(text)
    if os.environ.get("REFRESH_DOCTOR_CAPTURES") == "1":
        (CAPTURED / f"{name}.log").write_text(text)
    return [f.id for f in diagnose([str(log)])]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "worker.py").write_text(WORKER)
    return tmp_path


def test_master_stopped_while_its_peer_hangs_is_stopped_while_waiting(workdir: Path) -> None:
    port = free_port()
    node0, node1 = _start(workdir, 0, port, "wait"), _start(workdir, 1, port, "wait")
    try:
        _wait_for(workdir / "initialised", "0")
        time.sleep(3)  # rank 0 is in its all_reduce now, waiting for rank 1
    finally:
        for proc in (node0, node1):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)  # torchrun itself, as a scheduler would
    master = _finish(node0, workdir)
    _finish(node1, workdir)
    assert "death signal" in master
    ids = _diagnose(workdir, "i24_torchrun_master_killed_waiting", master)
    assert ids[0] == "stopped-while-waiting"


def test_a_rank_that_raises_is_named_on_its_node_and_its_peer_sees_a_failure(
        workdir: Path) -> None:
    port = free_port()
    node0, node1 = _start(workdir, 0, port, "fail"), _start(workdir, 1, port, "fail")
    master, other = _finish(node0, workdir), _finish(node1, workdir)
    assert node0.returncode != 0 and node1.returncode != 0
    failed = _diagnose(workdir, "i24_torchrun_rank_fails_node1", other)
    assert failed[0] == "rank-failed"
    peer = _diagnose(workdir, "i24_torchrun_rank_fails_node0", master)
    assert "no-failure" not in peer


def test_a_successful_two_node_jobs_bare_output_is_no_error(workdir: Path) -> None:
    # torchrun prints nothing of its own when all goes well: the script's lines are all there
    # is, none of them one ddpkit knows, so it claims neither a failure nor a finished run
    port = free_port()
    node0, node1 = _start(workdir, 0, port, "ok"), _start(workdir, 1, port, "ok")
    outputs = [_finish(node0, workdir), _finish(node1, workdir)]
    assert node0.returncode == 0 and node1.returncode == 0
    for node, text in enumerate(outputs):
        assert _diagnose(workdir, f"i24_torchrun_ok_node{node}", text) == ["no-result"]
