"""causes/silent_kill.py: a process killed by SIGKILL with nothing failing first is named
out-of-memory (host RAM, the kernel's OOM killer) as the most likely cause, with the dmesg
check first. Each line is the reporting program's own template, at these sources:

- DeepSpeed v0.14.0 deepspeed/launcher/launch.py, sigkill_handler:
  ``logger.error(f"{cmd} exits with return code = {last_return_code}")``
- torch v2.3.0 torch/distributed/elastic/multiprocessing/api.py (``failed (exitcode: %s)
  local_rank: %s (pid: %s) of binary: %s``) and errors/error_handler's summary
  (``Signal %d (%s) received by PID %d``)
- CPython 3.11 Lib/subprocess.py, CalledProcessError.__str__ (``Command '%s' died with %r.``),
  which accelerate v0.30.0's simple launcher (commands/launch.py) raises
- torch v2.3.0 torch/multiprocessing/spawn.py, ProcessExitedException
  (``process %d terminated with signal %s``)
- bash 5.2 jobs.c: strsignal(SIGKILL) ``Killed`` for a foreground job
Signal numbers from signal(7); a negative return code -N is Python's "killed by signal N".
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from cause_logs import top

from ddpkit.doctor.log.facts.extract import facts_of
from ddpkit.doctor.log.facts.kinds import FactKind

DEEPSPEED = ("[2024-03-01 10:00:00,000] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python',"
             " '-u', 'train.py', '--local_rank=1'] exits with return code = {code}")
ELASTIC = ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: {code}) "
           "local_rank: 0 (pid: 4242) of binary: /usr/bin/python")
SUMMARY = "  traceback : Signal {num} ({name}) received by PID 4242"
SUBPROCESS = ("subprocess.CalledProcessError: Command '['/usr/bin/python', 'train.py']' died "
              "with <Signals.{name}: {num}>.")
SPAWN = ("torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal "
         "{name}")
KILL = signal.SIGKILL


KILLED = {
    "deepspeed": [DEEPSPEED.format(code=-KILL.value)],
    "deepspeed-wrapped": ["[2024-03-01 10:00:00,000] [ERROR] [launch.py:321:sigkill_handler] "
                          "['/usr/bin/python', '-u',", "] exits with return code = -9"],
    "torchelastic": [ELASTIC.format(code=-KILL.value),
                     "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"],
    "torchelastic-summary": [SUMMARY.format(num=KILL.value, name=KILL.name)],
    "accelerate": [SUBPROCESS.format(name=KILL.name, num=KILL.value)],
    "spawn": [SPAWN.format(name=KILL.name)],
    "shell": ["Epoch 1:  12%|#2   | 120/1000", "Killed"],
}


@pytest.mark.parametrize("reporter", sorted(KILLED))
def test_a_silent_sigkill_is_most_likely_the_oom_killer(tmp_path: Path, reporter: str) -> None:
    found = top(tmp_path, ["Loading checkpoint shards: 100%", *KILLED[reporter]])
    assert (found.id, found.severity) == ("out-of-memory", "error")
    # (the old rule's own words, where it reads the kill too: "most often", the same check)
    assert "most likely" in found.explanation or "most often" in found.explanation
    assert "dmesg -T" in found.fix.splitlines()[0]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGSEGV, signal.SIGINT])
def test_another_signal_is_not_named_out_of_memory(tmp_path: Path, sig: signal.Signals) -> None:
    for line in (DEEPSPEED.format(code=-sig.value), SUBPROCESS.format(name=sig.name, num=sig.value)):
        assert top(tmp_path, [line]).id != "out-of-memory"


def test_a_failure_a_rule_names_says_more_than_the_kill(tmp_path: Path) -> None:
    found = top(tmp_path, [  # NCCL's own failure first (include/checks.h's WARN), then the kill
        "node-a:11:11 [0] NCCL INFO NCCL version 2.18.1+cuda12.1",
        "node-a:11:11 [0] include/shm.h:48 NCCL WARN Error while creating shared memory segment "
        "/dev/shm/nccl-abc (size 9637888)",
        DEEPSPEED.format(code=-9)])
    assert found.id == "shm"


# a peer's view of the killed rank (torch v2.3.0's Gloo, gloo/transport/tcp/pair.cc: "Read error
# [%s]:%d: %s", strerror(ECONNRESET)), and NCCL's watchdog on a collective the killed rank left
PEER_RESET = ("[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Read "
              "error [10.0.0.3]:4242: Connection reset by peer")


def test_the_launchers_first_process_to_end_explains_its_peers_lost_connection(
        tmp_path: Path) -> None:
    # DeepSpeed's launcher logs a process it found ended, before it kills the others: a SIGKILL
    # there is no signal of the launcher's, and the peers' lost connection is its aftermath
    found = top(tmp_path, [PEER_RESET, DEEPSPEED.format(code=-9)])
    assert found.id == "out-of-memory"
    assert "the launcher did not send it" in found.explanation
    # a report that does not say which process ended first does not order the kill before the
    # lost connection (the failed rank's own finding names the kill)
    elastic = top(tmp_path, [PEER_RESET, ELASTIC.format(code=-9)])
    assert elastic.id in ("connection-lost", "rank-failed")
    assert "the launcher did not send it" not in elastic.explanation


def test_the_kill_of_a_stuck_worker_or_the_kernels_words_are_no_death_report() -> None:
    for text in ("WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 4242 "
                 "closing signal SIGKILL",
                 "Out of memory: Killed process 4242 (python) total-vm:1000kB",
                 "Killed process 4242 (python)", "exitcode: 1", "return code = 0"):
        assert not [f for f in facts_of(text) if f.kind is FactKind.DEATH], text


def test_shell_exit_status_is_128_plus_the_signal() -> None:
    line = "subprocess.CalledProcessError: Command 'bash run.sh' returned non-zero exit status 137."
    assert [(f.value, f.detail) for f in facts_of(line) if f.kind is FactKind.DEATH] == [
        ("SIGKILL", "9")]
