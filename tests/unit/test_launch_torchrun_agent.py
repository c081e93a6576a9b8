"""torchrun through ``ddpkit.launch.torchrun.agent`` (issue 31, launch overhead): a torchrun that
returned ends after its exit functions without the interpreter's teardown of torch's modules
(0.3 to 0.5 CPU-s per node, on the path to the job's end); a failure ends the usual way.

No timing here (speed lives in benchmarks/launch_overhead.py): the real runs below show, through
a ``sitecustomize`` that marks what ran, that the exit functions ran and the teardown did not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddpkit.launch.torchrun.command import AGENT

# Loaded by every interpreter the run starts (PYTHONPATH): in torchrun's (whose sys.argv torchrun's
# main sets to ["torchrun", ...]) it notes the exit functions and the teardown of its modules.
MARKER = """
import atexit, os, sys

class _Teardown:
    fd = None

    def __del__(self, write=os.write):  # bound now: the teardown may have cleared ``os`` by then
        if self.fd is not None:
            write(self.fd, b"teardown\\n")

_kept = _Teardown()  # freed when the interpreter tears its modules down

def _exit_functions():
    if sys.argv[:1] == ["torchrun"]:
        _kept.fd = os.open(os.environ["DDPKIT_TEST_MARKS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(_kept.fd, b"exit functions\\n")

atexit.register(_exit_functions)
"""


def _run_agent(tmp_path: Path, port: int,
               script_text: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    pytest.importorskip("torch")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(MARKER)
    marks = tmp_path / "marks.txt"
    script = tmp_path / "job.py"
    script.write_text(script_text)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "LOGLEVEL": "INFO",
           "PYTHONPATH": os.pathsep.join([str(hooks), os.environ.get("PYTHONPATH", "")]),
           "DDPKIT_TEST_MARKS": str(marks)}
    proc = subprocess.run(
        [sys.executable, "-m", AGENT, "--", "--nnodes=1", "--nproc-per-node=1",
         "--master-addr=127.0.0.1", f"--master-port={port}", "--rdzv-backend=static",
         "--max-restarts=0", f"--log-dir={tmp_path / 'logs'}", str(script)],
        capture_output=True, text=True, timeout=150, env=env)
    return proc, marks.read_text().splitlines() if marks.exists() else []


@pytest.mark.timeout(180)
def test_a_torchrun_that_succeeded_ends_after_its_exit_functions_without_the_teardown(
        tcp_port: int, tmp_path: Path) -> None:
    proc, marks = _run_agent(tmp_path, tcp_port, "print('rank ran', flush=True)\n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rank ran" in proc.stdout
    # torchrun's last log line (its exit barrier) still reaches the output: flushed before the end
    assert "Done waiting for other agents" in proc.stderr, proc.stderr[-3000:]
    assert marks == ["exit functions"]


@pytest.mark.timeout(180)
def test_a_torchrun_whose_rank_failed_ends_the_usual_way(tcp_port: int, tmp_path: Path) -> None:
    proc, marks = _run_agent(tmp_path, tcp_port, "import sys\nsys.exit(3)\n")
    assert proc.returncode == 1
    assert "ChildFailedError" in proc.stderr and "exitcode  : 3" in proc.stderr, proc.stderr[-3000:]
    assert marks == ["exit functions", "teardown"]
