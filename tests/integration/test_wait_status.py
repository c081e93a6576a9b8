"""Every wait says what it waits for (issue 21), on loopback with two real nodes: the master
waiting for a node that never comes, and a node whose ranks finished waiting in torchrun's exit
barrier while the other node's rank failed; each prints its status line within 10 s and again
~10 s later, and SIGTERM then stops it, counting the processes it really stopped (none: no rank
was alive), with nothing left behind. Time bounds are generous: they bound a silence, they do not
time a speed."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from ports import free_port

pytestmark = [pytest.mark.slow]

RANKS = """
import os, sys, time
if os.environ["RANK"] == "1":
    time.sleep(1)
    sys.exit(3)
print("rank 0 done", flush=True)
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("NCCL_", "GLOO_", "TORCH_", "PET_", "MASTER_", "DDPKIT_"))}




class Node:
    """A ``ddpkit launch`` whose stderr lines arrive, time-stamped, on a queue."""

    def __init__(self, tmp_path: Path, rank: int, port: int, script: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ddpkit", "launch", "--nnodes", "2", "--node-rank", str(rank),
             "--master-addr", "127.0.0.1", "--master-port", str(port), "--rdzv-timeout", "60",
             "--run-dir", str(tmp_path / f"node{rank}"), str(script)],
            env=_env(), text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self.seen: list[str] = []
        self.paragraph = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put((time.monotonic(), line.rstrip("\n")))

    def wait_for(self, text: str, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while True:
            try:
                when, line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {text!r} within {timeout} s:\n" +
                                     "\n".join(self.seen[-30:])) from None
            self.seen.append(line)
            # a status wider than 100 columns wraps: its continuation lines start "ddpkit:   "
            continued = line.startswith("ddpkit:   ") and len(self.seen) > 1
            self.paragraph = (self.paragraph + " " + line[len("ddpkit:"):]) if continued else line
            if text in " ".join(self.paragraph.split()):
                self.paragraph = ""  # found: its own continuation lines cannot match again
                return when

    def stop(self) -> tuple[int, float]:
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        took = time.monotonic() - started
        time.sleep(0.5)  # the reader drains the last lines
        while not self.lines.empty():
            self.seen.append(self.lines.get()[1])
        return code, took

    def kill(self) -> None:
        if self.proc.poll() is None:
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                child.kill()
            self.proc.kill()
            self.proc.wait()


def _no_leftovers(tmp_path: Path) -> None:
    leftovers = [p for p in psutil.process_iter(["cmdline"])
                 if str(tmp_path) in " ".join(p.info["cmdline"] or [])]
    assert leftovers == [], leftovers


@pytest.mark.timeout(120)
def test_the_master_says_it_waits_for_the_other_node(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(RANKS)
    node = Node(tmp_path, 0, free_port(), script)
    try:
        asked = node.wait_for("now run on every other node", 60)
        first = node.wait_for("waiting for the other node (node rank 1) to join the rendezvous", 30)
        assert first - asked < 10
        second = node.wait_for("to join the rendezvous", 30)
        assert 5 < second - first < 15
        code, took = node.stop()
    finally:
        node.kill()
    assert code == 130 and took < 15
    assert any("stopped torchrun (no rank process was running)" in s for s in node.seen), node.seen
    _no_leftovers(tmp_path)


@pytest.mark.timeout(150)
def test_a_node_in_torchruns_exit_barrier_says_so_and_stops_on_sigterm(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(RANKS)
    port = free_port()
    nodes = [Node(tmp_path, rank, port, script) for rank in (0, 1)]
    try:
        assert nodes[1].proc.wait(timeout=90) != 0  # its rank failed: node 1 is done
        ended = time.monotonic()
        first = nodes[0].wait_for("this node's ranks have finished; torchrun waits for the other "
                                  "node to finish theirs (its exit barrier", 30)
        assert first - ended < 10
        second = nodes[0].wait_for("its exit barrier", 30)
        assert 5 < second - first < 15
        code, took = nodes[0].stop()
    finally:
        for node in nodes:
            node.kill()
    assert code == 130 and took < 15
    assert any("stopped torchrun (no rank process was running)" in s for s in nodes[0].seen), \
        nodes[0].seen[-20:]
    _no_leftovers(tmp_path)
