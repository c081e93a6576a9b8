"""causes/bus_error.py: a process that died of SIGBUS with nothing failing first is named shm
(/dev/shm ran out), with the size check first. Each line is the reporter's own template:

- DeepSpeed v0.14.0 deepspeed/launcher/launch.py, sigkill_handler:
  ``logger.error(f"{cmd} exits with return code = {last_return_code}")``
- torch v2.3.0 torch/distributed/elastic/multiprocessing/api.py: ``failed (exitcode: %s)
  local_rank: %s (pid: %s) of binary: %s``
- CPython 3.11 Lib/subprocess.py, CalledProcessError.__str__: ``Command '%s' died with %r.``
- torch v2.3.0 torch/multiprocessing/spawn.py: ``process %d terminated with signal %s``
- bash 5.2 jobs.c: strsignal(SIGBUS) ``Bus error``, `` (core dumped)`` when it dumped core
Why SIGBUS means shared memory: mmap(2), "SIGBUS: attempted access to a page of the buffer
that lies beyond the end of the mapped file" (a tmpfs that is full cannot back the page).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from cause_logs import top

BUS = signal.SIGBUS
REPORTS = {
    "deepspeed": ("[2024-03-01 10:00:00,000] [ERROR] [launch.py:321:sigkill_handler] "
                  f"['/usr/bin/python', '-u', 'train.py'] exits with return code = {-BUS.value}"),
    "torchelastic": ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: "
                     f"{-BUS.value}) local_rank: 1 (pid: 4243) of binary: /usr/bin/python"),
    "accelerate": ("subprocess.CalledProcessError: Command '['/usr/bin/python', 'train.py']' "
                   f"died with <Signals.{BUS.name}: {BUS.value}>."),
    "spawn": ("torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with "
              f"signal {BUS.name}"),
    "shell": "run.sh: line 3:  4242 Bus error               (core dumped) python train.py",
}


@pytest.mark.parametrize("reporter", sorted(REPORTS))
def test_a_silent_sigbus_is_shared_memory(tmp_path: Path, reporter: str) -> None:
    found = top(tmp_path, ["Epoch 1:  12%|#2   | 120/1000", REPORTS[reporter]])
    assert (found.id, found.severity) == ("shm", "error")
    assert "/dev/shm" in found.fix  # (the old rule's fix where it reads the death too)
    if "df -h" in found.fix:
        assert "most likely" in found.explanation


def test_a_segfault_is_not_shared_memory(tmp_path: Path) -> None:
    segv = signal.SIGSEGV
    for line in (REPORTS["deepspeed"].replace(f"= {-BUS.value}", f"= {-segv.value}"),
                 "run.sh: line 3:  4242 Segmentation fault      (core dumped) python train.py"):
        assert top(tmp_path, [line]).id != "shm"


def test_an_earlier_failure_a_rule_names_says_more(tmp_path: Path) -> None:
    found = top(tmp_path, [  # torch's CUDA OOM (c10/cuda/CUDACachingAllocator.cpp) first
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        REPORTS["deepspeed"]])
    assert found.id == "out-of-memory"
