"""A run directory belongs to one job (issue 32): unique default names, a second claim refused,
and a launcher log whose failed write is a warning, not a crash."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from ddpkit.errors import EnvironmentProblem
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.node.run_dir import LauncherLog, claim, default_run_dir


def test_default_names_differ_between_processes_started_in_one_second(tmp_path: Path) -> None:
    config = LaunchConfig(nnodes=1, node_rank=0, master_addr="127.0.0.1", entry="train.py")
    names = {default_run_dir(config, tmp_path, pid=pid).name for pid in (101, 102, 103)}
    assert len(names) == 3
    assert all(name.split("-")[2] == "node0" for name in names)


def test_a_second_claim_of_one_directory_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "a"
    claim(run, flight_recorder=True)
    assert (run / "torchrun.log").is_file() and (run / "flight-recorder").is_dir()
    with pytest.raises(EnvironmentProblem) as caught:
        claim(run, flight_recorder=False)
    assert caught.value.error_id == "run-dir-in-use"
    assert str(run) in caught.value.message


def test_an_existing_empty_directory_can_be_claimed(tmp_path: Path) -> None:
    claim(tmp_path, flight_recorder=False)
    assert (tmp_path / "torchrun.log").read_text() == ""


class _FullFile:
    """A file whose writes fail as on a full disk once ``room`` characters were written."""

    def __init__(self, room: int) -> None:
        self.room, self.closed = room, False

    def write(self, text: str) -> int:
        if len(text) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(text)
        return len(text)

    def close(self) -> None:
        self.closed = True
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_ends_the_copy_and_says_what_was_kept(tmp_path: Path) -> None:
    log = LauncherLog(tmp_path / "torchrun.log", append=False)
    full = _FullFile(room=12)
    log._file = full  # type: ignore[assignment]
    log.write("first line")
    log.write("second line that does not fit")
    log.write("third")  # no second attempt, no exception
    log.close()
    assert full.closed and log.lines == 1
    warning = log.warning(kept="/runs/a/torchrun")
    assert warning is not None
    assert "full" in warning and "No space left on device" in warning
    assert "torchrun.log" in warning and "/runs/a/torchrun" in warning
    assert "result stands" in warning


def test_every_line_written_gives_no_warning(tmp_path: Path) -> None:
    log = LauncherLog(tmp_path / "torchrun.log", append=False)
    log.write("one")
    log.close()
    assert log.warning(kept="x") is None
    assert (tmp_path / "torchrun.log").read_text() == "one\n"
