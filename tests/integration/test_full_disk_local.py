"""A run directory on a filesystem that fills up during a successful job (issue 32): the job's
result and exit code stand, ddpkit warns which file it could not write, the ranks' logs stay.

The filesystem is a 2 MB tmpfs mounted for the test (root), never the real disk; it is unmounted
whatever happens."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.root]

SCRIPT = textwrap.dedent("""
    import ctypes, errno, os, sys
    # Room for this rank's own output is taken before the disk fills (fallocate, keeping the
    # size), so its lines are written after the fill and torchrun's tee copies them into
    # torchrun.log only then: that copy is the write which must fail, whatever torchrun's
    # polling interval.
    libc = ctypes.CDLL(None, use_errno=True)
    FALLOC_FL_KEEP_SIZE = 1
    assert libc.fallocate(1, FALLOC_FL_KEEP_SIZE, ctypes.c_long(0), ctypes.c_long(1 << 16)) == 0
    filler = os.path.join(sys.argv[1], "filler")
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"x" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    small = os.path.join(sys.argv[1], "filler-small")
    with open(small, "wb", buffering=0) as f:  # the last blocks too
        try:
            while True:
                f.write(b"x")
        except OSError:
            pass
    for step in range(50):
        print(f"training step {step}", flush=True)
""")


@pytest.mark.timeout(200)
def test_a_full_run_directory_is_a_warning_not_a_crash(tmp_path: Path, tcp_port: int) -> None:
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True)
    try:
        script = tmp_path / "train.py"
        script.write_text(SCRIPT)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GLOO_", "PET_"))}
        done = subprocess.run(
            [sys.executable, "-m", "ddpkit", "launch", "--nproc-per-node", "1", "--master-port",
             str(tcp_port), "--run-dir", str(mount / "run"), str(script), str(mount)],
            env={**env, "COLUMNS": "200"}, capture_output=True, text=True, timeout=150)
        assert os.statvfs(mount).f_bavail == 0  # the disk really was full
        assert done.returncode == 0, done.stderr[-3000:]
        assert "internal-error" not in done.stderr
        assert "warning:" in done.stderr and "torchrun.log" in done.stderr, done.stderr[-3000:]
        assert "is full" in done.stderr, done.stderr[-3000:]
        assert "training step 49" in done.stdout
        rank_logs = list((mount / "run" / "torchrun").rglob("*.log"))
        assert rank_logs and any("training step 49" in p.read_text() for p in rank_logs)
    finally:
        subprocess.run(["umount", str(mount)], check=False)
    assert not os.path.ismount(mount)
