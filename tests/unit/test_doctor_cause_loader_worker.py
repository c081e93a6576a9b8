"""causes/loader_worker.py: a rank's DataLoader worker killed by a signal. Source of the lines:
torch v2.4.0, torch/csrc/DataLoader.cpp, the SIGCHLD check of the workers
(``oss << "DataLoader worker (pid " << worker_pid << ") is killed by signal: " <<
strsignal(infop.si_status) << ". "``, for SIGBUS then "It is possible that dataloader's workers
are out of shared memory. Please try to raise your shared memory limit."), raised as a
RuntimeError in the rank; glibc's strsignal names ("Killed", "Bus error", "Segmentation fault");
Gloo's pair.cc on the peer: "Connection closed by peer [<addr>]:<port>"."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

KILLED = "DataLoader worker (pid {pid}) is killed by signal: {name}. "
SHM_HINT = ("It is possible that dataloader's workers are out of shared memory. Please try to "
            "raise your shared memory limit.")
PEER = ("[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection "
        "closed by peer [10.0.0.3]:4318")


@pytest.mark.parametrize("head", ["RuntimeError: ", "[rank1]: RuntimeError: ", ""])
@pytest.mark.parametrize("pid", ["52", "3264"])
def test_a_worker_killed_by_sigkill_is_host_memory(tmp_path: Path, head: str, pid: str) -> None:
    found = top(tmp_path, [head + KILLED.format(pid=pid, name="Killed"), PEER])
    assert (found.id, found.severity) == ("out-of-memory", "error")
    assert f"pid {pid}" in found.explanation and "OOM killer" in found.explanation
    assert "dmesg" in found.fix


def test_a_worker_killed_by_sigbus_is_shared_memory(tmp_path: Path) -> None:
    found = top(tmp_path, ["RuntimeError: " + KILLED.format(pid=125, name="Bus error") + SHM_HINT,
                           PEER])
    assert (found.id, found.severity) == ("shm", "error")


def test_the_ipc_reset_before_it_is_not_a_lost_peer(tmp_path: Path) -> None:
    # (the rank's traceback: Python's multiprocessing connection reset, then torch's message)
    found = top(tmp_path, [
        '[rank1]:   File "/usr/lib/python3.11/multiprocessing/connection.py", line 395, in _recv',
        "[rank1]:     chunk = read(handle, remaining)",
        "[rank1]: ConnectionResetError: [Errno 104] Connection reset by peer",
        "[rank1]: During handling of the above exception, another exception occurred:",
        "[rank1]: RuntimeError: " + KILLED.format(pid=77, name="Killed"), PEER])
    assert found.id == "out-of-memory"


def test_a_worker_killed_by_another_signal_is_not_this(tmp_path: Path) -> None:
    found = top(tmp_path, ["RuntimeError: " + KILLED.format(pid=9, name="Segmentation fault")])
    assert found.id != "out-of-memory" and "OOM killer" not in found.explanation
