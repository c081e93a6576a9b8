"""`ddpkit stacks RUN_DIR`: the ranks a launch recorded, dumped; clear errors when there are none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from ddpkit.launch.hang.pyspy import find_py_spy


def _registry(run_dir: Path, procs: list[tuple[int, float]]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "ranks.json").write_text(json.dumps({
        "schema": "ddpkit.ranks/1", "node_rank": 0, "host": "here",
        "ranks": [{"local_rank": i, "rank": i, "pid": pid, "create_time": created}
                  for i, (pid, created) in enumerate(procs)]}))


def test_a_directory_without_a_rank_list_is_named(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("stacks", str(tmp_path))
    assert result.code == 3 and "error [no-rank-list]" in result.err


def test_a_job_that_ended_is_not_running(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _registry(tmp_path, [(2**22 + 11, 5.0)])
    result = run_cli("stacks", str(tmp_path))
    assert result.code == 3 and "error [job-not-running]" in result.err


@pytest.mark.skipif(find_py_spy({}, sys.executable) is None, reason="py-spy not installed")
def test_a_running_rank_is_dumped_and_left_running(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "rank.py"
    script.write_text("import time\nprint('up', flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "up\n"
        _registry(tmp_path / "run", [(proc.pid, psutil.Process(proc.pid).create_time())])
        result = run_cli("stacks", str(tmp_path / "run"), "--json")
        if "py-spy-not-permitted" in result.out:
            pytest.skip("ptrace not permitted here")
        assert result.code == 0, result.err
        doc = result.json()
        assert doc["schema"] == "ddpkit.stacks/1"
        assert doc["summary"] == ["rank 0 is at rank.py:3 `time.sleep(60)` (here, pid "
                                  f"{proc.pid})"]
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
