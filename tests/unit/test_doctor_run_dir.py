"""`doctor --log RUN_DIR`: a ddpkit run directory is read as its launcher log and rank logs, and the
rank's exception is named (the run captured in tests/fixtures/tracebacks/README.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ddpkit.doctor.log.run_dir import expand, is_run_dir, run_dir_logs
from ddpkit.errors import ExitCode

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tracebacks"


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "20261202-222805-node0"
    rank = run / "torchrun" / "none_iha4z7nn" / "attempt_0" / "0"
    rank.mkdir(parents=True)
    shutil.copy(FIXTURES / "user-script-torchrun.log", run / "torchrun.log")
    shutil.copy(FIXTURES / "user-script-rank0.stderr.log", rank / "stderr.log")
    (rank / "stdout.log").write_text("")
    return run


def test_a_run_dir_expands_to_its_logs(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    assert is_run_dir(str(run)) and not is_run_dir(str(tmp_path))
    logs = run_dir_logs(str(run))
    assert logs[0] == str(run / "torchrun.log")
    assert [Path(p).name for p in logs[1:]] == ["stderr.log", "stdout.log"]
    assert expand(["-", str(run / "torchrun.log")]) == ["-", str(run / "torchrun.log")]


def test_doctor_on_a_run_dir_names_the_ranks_exception(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("doctor", "--log", str(_run_dir(tmp_path)))
    assert result.code != 0
    assert "RuntimeError: Numpy is not available" in " ".join(result.out.split())  # wrapped


def test_a_plain_directory_is_still_refused_with_the_reason(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("doctor", "--log", str(tmp_path))
    assert result.code == ExitCode.CONFIG
    assert "error [log-unreadable]" in result.err
    said = " ".join(result.err.split())
    assert "neither a ddpkit run directory" in said and "nor torchrun's --log-dir" in said
