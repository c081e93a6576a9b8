"""Ending a process that imported torch without the interpreter's teardown
(:mod:`ddpkit.launch.ending`): the exit functions run, the streams are flushed, the status is the
one chosen, and a daemon thread returning from torch's C++ during the teardown cannot turn that
status into SIGABRT."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import threading

import pytest

from ddpkit.launch import ending


def test_end_now_runs_the_exit_functions_then_ends_with_the_status_given() -> None:
    done: list[str] = []
    ending.end_now(exit_functions=lambda: done.append("exit functions"),
                   end=lambda code: done.append(f"end {code}"))
    ending.end_now(6, exit_functions=lambda: done.append("exit functions"),
                   end=lambda code: done.append(f"end {code}"))
    assert done == ["exit functions", "end 0", "exit functions", "end 6"]


def test_end_now_ends_with_cpython_s_120_when_the_last_output_cannot_be_flushed() -> None:
    class Full(io.StringIO):
        def flush(self) -> None:
            raise OSError(28, "No space left on device")

    done: list[str] = []
    for status in (0, 6):
        ending.end_now(status, exit_functions=lambda: None,
                       end=lambda code: done.append(f"end {code}"),
                       streams=[io.StringIO(), Full()])
    # a failure's own status stays: it says more than "the last output was lost"
    assert done == [f"end {ending.FLUSH_FAILED}", "end 6"] == ["end 120", "end 6"]


def test_end_now_leaves_the_usual_end_while_a_thread_that_is_not_a_daemon_runs() -> None:
    release = threading.Event()
    worker = threading.Thread(target=release.wait, daemon=False)
    worker.start()
    done: list[str] = []
    try:
        assert not ending.daemon_threads_alive()
        ending.end_now(exit_functions=lambda: done.append("exit functions"),
                       end=lambda code: done.append(f"end {code}"))
    finally:
        release.set()
        worker.join(timeout=10)
    assert done == []  # the interpreter's own end waits for the thread, as without ddpkit
    daemon = threading.Thread(target=release.wait, daemon=True)  # a daemon does not hold it
    release.clear()
    daemon.start()
    try:
        assert ending.daemon_threads_alive()
        ending.end_now(exit_functions=lambda: done.append("exit functions"),
                       end=lambda code: done.append(f"end {code}"))
    finally:
        release.set()
        daemon.join(timeout=10)
    assert done == ["exit functions", "end 0"]
    assert not ending.daemon_threads_alive()


# A TCPStore client's wait (GIL released, inside torch's C++) that times out 1 s after it
# began, in a daemon thread, while the interpreter tears itself down (an object whose __del__
# takes 5 s, left in a reference cycle with the collector off: the teardown's last collection
# frees it). argv[1]: "ddpkit" ends through the CLI's entry (an unknown command, status 2),
# "plain" through sys.exit(2); argv[2]: "thread" starts the wait, "none" does not.
RACE = """
import atexit, datetime, gc, os, sys, threading, time
from torch.distributed import TCPStore
from ddpkit.cli import main as cli

class Slow:
    def __del__(self, write=os.write, sleep=time.sleep):
        write(1, b"teardown\\n")
        sleep(5.0)

gc.disable()
slow = Slow()
slow.itself = slow
del slow
atexit.register(lambda: print("exit functions", flush=True))
server = TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=30),
                  wait_for_workers=False)
client = TCPStore("127.0.0.1", server.port, None, False, datetime.timedelta(seconds=30))

def wait():
    try:
        client.wait(["never-set"], datetime.timedelta(seconds=1))
    except Exception:
        pass

if sys.argv[2] == "thread":
    threading.Thread(target=wait, daemon=True).start()
    time.sleep(0.1)
if sys.argv[1] == "plain":
    sys.exit(2)
sys.argv = ["ddpkit", "frobnicate"]
cli.entry()
"""


def _race(how: str, thread: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("torch")
    return subprocess.run([sys.executable, "-c", RACE, how, thread], capture_output=True,
                          text=True, timeout=90)


@pytest.mark.timeout(200)
def test_the_cli_ends_with_its_status_when_a_thread_returns_from_torch_during_the_teardown() -> None:
    ended = _race("ddpkit", "thread")
    assert ended.returncode == 2, ended.stderr[-2000:]  # the usage error's status, not SIGABRT
    assert "unknown-command" in ended.stderr
    assert ended.stdout.splitlines() == ["exit functions"]  # ran; the teardown did not
    assert "terminate called" not in ended.stderr

    calm = _race("ddpkit", "none")  # no daemon thread: the usual end, teardown included
    assert calm.returncode == 2, calm.stderr[-2000:]
    assert calm.stdout.splitlines() == ["exit functions", "teardown"]

    if sys.version_info < (3, 14):  # 3.14 parks such a thread instead of ending it
        # The hazard itself: the same process ended by sys.exit dies of SIGABRT.
        plain = _race("plain", "thread")
        assert plain.returncode == -signal.SIGABRT, (plain.returncode, plain.stderr[-2000:])
        assert "terminate called without an active exception" in plain.stderr
