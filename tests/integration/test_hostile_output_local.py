"""A rank that prints terminal control sequences and raises with them in its message (issue 32):
launch's own output (the rank's lines it passes on, the failure summary quoting the exception and
the last lines) carries none of them raw."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

SCRIPT = textwrap.dedent(r"""
    HOSTILE = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m\x9d0;t\x9c\u202eevil\u202c\x07\x85"
    print("last line " + HOSTILE, flush=True)
    raise ValueError("boom " + HOSTILE)
""")
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.mark.timeout(150)
def test_a_hostile_rank_reaches_the_terminal_plain(tmp_path: Path, tcp_port: int) -> None:
    script = tmp_path / "hostile.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GLOO_", "PET_"))}
    done = subprocess.run(
        [sys.executable, "-m", "ddpkit", "launch", "--nproc-per-node", "1", "--master-port",
         str(tcp_port), "--run-dir", str(tmp_path / "run"), str(script)],
        env=env, capture_output=True, text=True, timeout=120)
    both = done.stdout + done.stderr
    assert done.returncode != 0
    assert "ValueError: boom" in done.stderr and "evil" in done.stderr, done.stderr[-3000:]
    assert not FORBIDDEN.search(both), repr(FORBIDDEN.findall(both))
