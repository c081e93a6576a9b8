"""torchrun's own --log-dir, written by the real torchrun, read by `ddpkit doctor --log DIR`: two
ranks on Gloo over loopback, rank 1 failing in the script's own code after init while rank 0
waits in a barrier. The logs are torch's, not ddpkit's: each rank's stderr in its own file, each
line after torch's "[rank<N>]: " tag. doctor names rank 1 and its KeyError first, rank 0's lost
connection as what followed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
from multinode import clean_env

from ports import free_port

pytestmark = [pytest.mark.slow]

SCRIPT = textwrap.dedent("""
    import torch.distributed as dist
    dist.init_process_group("gloo")
    if dist.get_rank() == 1:
        batch = {"input_ids": [1, 2, 3]}
        print(batch["labels"])
    dist.barrier()
""")


@pytest.mark.timeout(180)
def test_a_real_torchrun_log_dir_names_the_rank_that_failed_first(tmp_path: Path) -> None:
    script = tmp_path / "own_failure_job.py"
    script.write_text(SCRIPT)
    log_dir = tmp_path / "logs"
    env = clean_env()
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
         "--log-dir", str(log_dir), "--redirects", "3", str(script)],
        env=env, capture_output=True, text=True, timeout=150, cwd=tmp_path)
    assert run.returncode != 0, run.stderr[-2000:]
    assert list(log_dir.glob("*/attempt_0/1/stderr.log")), run.stderr[-2000:]

    doctor = subprocess.run([sys.executable, "-m", "ddpkit", "doctor", "--log", str(log_dir),
                             "--json"], env=clean_env(), capture_output=True, text=True,
                            timeout=60)
    assert doctor.returncode == 1, doctor.stderr
    top = json.loads(doctor.stdout)["findings"][0]
    assert top["id"] == "rank-failed", top
    assert "Rank 1 failed on its own account: KeyError: 'labels'" in top["explanation"]
    assert top["evidence"][0]["file"].endswith("attempt_0/1/stderr.log")
    # torchrun and its ranks are gone: nothing of the job is left behind
    assert not [p for p in psutil.process_iter(["cmdline"])
                if str(script) in " ".join(p.info["cmdline"] or [])]
