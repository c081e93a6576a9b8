"""What a healthy `ddpkit launch` loads and starts (issue 31, launch overhead): a regression guard
that counts, not times (speed lives in benchmarks/launch_overhead.py).

One real single-node launch, with a ``sitecustomize`` on PYTHONPATH that every interpreter of the
job loads: each notes its command line at its start, and the launcher writes its ``sys.modules``
at its end. The launcher never imports torch (torchrun does, in its own process), nor the doctor's
engine, cryptography or any other front end's code; and the job runs in exactly three interpreters
(the launcher, torchrun through ddpkit's agent, the rank): no wrapper or summary process of its
own. Profiled on the sim (2 nodes): the launcher costs about 0.14 CPU-s to start and 10 ms of CPU
per second while the ranks run; torch alone would add about 1.2 CPU-s to every launcher."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Imported by no healthy launch: each is heavy, or belongs to another command.
NEVER_IN_THE_LAUNCHER = (
    "torch", "numpy", "cryptography", "matplotlib",
    "ddpkit.doctor.log.causes", "ddpkit.doctor.log.rules", "ddpkit.doctor.log.facts",
    "ddpkit.doctor.log.scan", "ddpkit.doctor.log.verdict", "ddpkit.doctor.catalogue",
    "ddpkit.doctor.checks", "ddpkit.doctor.cluster", "ddpkit.bench", "ddpkit.sim",
    "ddpkit.launch.join", "ddpkit.clustertest",
)

HOOK = """
import atexit, json, os, sys

with open(os.environ["DDPKIT_TEST_STARTS"], "a") as out:
    out.write(json.dumps(sys.argv) + "\\n")  # sys.argv as site sees it: the interpreter's start

def _modules():
    if sys.argv[:1] and sys.argv[0].endswith(os.path.join("ddpkit", "__main__.py")):
        with open(os.environ["DDPKIT_TEST_MODULES"], "w") as out:
            out.write("\\n".join(sorted(sys.modules)))

atexit.register(_modules)
"""


@pytest.mark.timeout(240)
def test_a_healthy_launch_starts_three_interpreters_and_its_launcher_stays_light(
        tcp_port: int, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(HOOK)
    script = tmp_path / "job.py"
    script.write_text("print('rank ran', flush=True)\n")
    starts, modules = tmp_path / "starts.jsonl", tmp_path / "modules.txt"
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(hooks), os.environ.get("PYTHONPATH", "")]),
           "DDPKIT_TEST_STARTS": str(starts), "DDPKIT_TEST_MODULES": str(modules)}
    proc = subprocess.run(
        [sys.executable, "-m", "ddpkit", "launch", "--nproc-per-node", "1", "--master-port",
         str(tcp_port), "--run-dir", str(tmp_path / "run"), str(script)],
        capture_output=True, text=True, timeout=200, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rank ran" in proc.stdout

    loaded = set(modules.read_text().splitlines())
    assert "ddpkit.launch.node.session" in loaded  # the hook saw the launcher that ran the job
    heavy = sorted(m for m in loaded if any(m == n or m.startswith(n + ".")
                                            for n in NEVER_IN_THE_LAUNCHER))
    assert heavy == [], f"the launcher imported {heavy}"

    argvs = [json.loads(line) for line in starts.read_text().splitlines()]
    # site runs before ``-m`` is resolved: a module's interpreter shows ["-m", ARGS...] here
    assert len(argvs) == 3, argvs  # the launcher, torchrun (through ddpkit's agent), the rank
    assert sorted(a[:2] if a[0] == "-m" else a[:1] for a in argvs) == [
        ["-m", "--"], ["-m", "launch"], [str(script)]], argvs
