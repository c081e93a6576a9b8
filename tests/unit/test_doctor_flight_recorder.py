"""``doctor --log`` on torch's flight-recorder dumps (issue 14).

The dumps under tests/fixtures/flight-recorder/ were written by torch 2.13.0 itself on 2-rank Gloo
jobs (``record.py`` there says how, and re-records them); the NCCL-shaped ones below are built in
the layout of those dumps, with the fields NCCL's watchdog fills in (``state`` "started" and
"completed"), since no GPU was at hand.
"""

from __future__ import annotations

import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ddpkit.doctor.log import flight_recorder as fr
from ddpkit.doctor.log.diagnose import diagnose
from ddpkit.errors import ConfigError, ExitCode

DUMPS = Path(__file__).resolve().parents[1] / "fixtures" / "flight-recorder"
LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
RunCli = Callable[..., Any]


def _entry(seq: int, op: str, sizes: list[list[int]], state: str, line: int,
           *, pg: str = "0", p2p: bool = False) -> dict[str, Any]:
    return {"collective_seq_id": seq, "p2p_seq_id": 0, "is_p2p": p2p, "pg_id": int(pg),
            "process_group": (pg, "default_pg"), "profiling_name": op, "input_sizes": sizes,
            "output_sizes": sizes, "state": state, "retired": state == "completed",
            "frames": [{"filename": "/venv/lib/python3.11/site-packages/torch/distributed/"
                                    "distributed_c10d.py", "line": 2501, "name": "all_reduce"},
                       {"filename": "/home/user/train.py", "line": line, "name": "step"}]}


def _write(folder: Path, rank: int, entries: list[dict[str, Any]], completed: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"version": "2.10", "comm_lib_version": "2.27.3", "entries": entries,
           "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2]"}},
           "pg_status": {"0": {"last_enqueued_collective": entries[-1]["collective_seq_id"],
                               "last_started_collective": -1,
                               "last_completed_collective": completed}}}
    path = folder / f"rank_{rank}"
    path.write_bytes(pickle.dumps(doc, protocol=2))
    return path


def test_torch_dump_where_a_rank_skipped_an_all_reduce_names_that_rank_and_line() -> None:
    found = fr.finding(fr.dump_files(str(DUMPS / "skipped")))
    assert found is not None and found.id == "job-hung"
    assert "rank 1 never called collective #5 (gloo:all_reduce)" in found.explanation
    assert "rank 1 stopped after #4, gloo:broadcast [[4]] at fr_job.py:8" in found.explanation
    assert "rank 0 entered collective #5 of process group 0, gloo:all_reduce [[1000]] at " \
           "fr_job.py:13" in found.explanation
    assert [(Path(e.file).name, e.line) for e in found.evidence] == [("rank_0", 5), ("rank_1", 4)]


def test_torch_dump_where_ranks_called_different_collectives_says_which() -> None:
    found = fr.finding(fr.dump_files(str(DUMPS / "mismatch")))
    assert found is not None
    assert "rank 0 called gloo:all_reduce [[1000]] at fr_job.py:19" in found.explanation
    assert "rank 1 called gloo:broadcast [[16]] at fr_job.py:17" in found.explanation
    assert "the ranks called different collectives at #5" in found.explanation  # 1 against 1


def test_torch_dump_of_a_healthy_job_gives_no_finding() -> None:
    files = fr.dump_files(str(DUMPS / "healthy"))
    assert len(files) == 2 and fr.finding(files) is None
    assert [f.id for f in diagnose([str(DUMPS / "healthy")])] == []


def test_nccl_dumps_three_ranks_one_behind(tmp_path: Path) -> None:
    common = [_entry(s, "nccl:all_reduce", [[1024]], "completed", 40) for s in (1, 2, 3)]
    pending = _entry(4, "nccl:all_reduce", [[1024]], "started", 40)
    _write(tmp_path, 0, [*common, pending], completed=3)
    _write(tmp_path, 1, common, completed=3)
    _write(tmp_path, 2, [*common, pending], completed=3)
    found = fr.finding(fr.dump_files(str(tmp_path)))
    assert found is not None and found.title == "The job hung: a rank is somewhere the others are not"
    assert "ranks 0, 2 entered collective #4" in found.explanation
    assert "likely cause: rank 1 never called collective #4 (nccl:all_reduce)" in found.explanation


def test_nccl_dumps_one_of_three_with_other_sizes_is_the_odd_one(tmp_path: Path) -> None:
    for rank in range(3):
        sizes = [[7]] if rank == 2 else [[1024]]
        _write(tmp_path, rank, [_entry(1, "nccl:all_reduce", [[8]], "completed", 30),
                                _entry(2, "nccl:all_gather", sizes, "started", 31)], completed=1)
    found = fr.finding(fr.dump_files(str(tmp_path)))
    assert found is not None
    assert "likely cause: rank 2 called a different collective at #2" in found.explanation


def test_every_rank_inside_the_same_unfinished_collective_blames_no_rank(tmp_path: Path) -> None:
    for rank in range(2):
        _write(tmp_path, rank, [_entry(9, "nccl:all_reduce", [[4]], "started", 12)], completed=8)
    found = fr.finding(fr.dump_files(str(tmp_path)))
    assert found is not None
    assert found.title == "The job hung: every rank waits in the same collective"
    assert "not one rank's code" in found.explanation


def test_point_to_point_entries_are_not_compared_as_collectives(tmp_path: Path) -> None:
    done = _entry(1, "nccl:all_reduce", [[4]], "completed", 12)
    _write(tmp_path, 0, [done, _entry(1, "nccl:send", [[4]], "started", 13, p2p=True)], 1)
    _write(tmp_path, 1, [done], 1)
    assert fr.finding(fr.dump_files(str(tmp_path))) is None


def test_run_dir_with_dumps_and_logs_puts_the_recorder_first(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(LOGS / "nccl" / "benign.log", run / "torchrun.log")
    shutil.copytree(DUMPS / "skipped", run / "flight-recorder")
    found = diagnose([str(run)])
    assert found[0].id == "job-hung" and "no-failure" not in [f.id for f in found]
    assert fr.split([str(run)]) == (fr.dump_files(str(run)), [str(run)])
    assert fr.split([str(run / "flight-recorder")])[1] == []


def test_a_dump_that_asks_for_a_class_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    class Exploit:
        def __reduce__(self) -> tuple[Any, ...]:
            return (open, (str(marker), "w"))

    (tmp_path / "rank_0").write_bytes(pickle.dumps({"entries": [Exploit()]}, protocol=2))
    with pytest.raises(ConfigError) as caught:
        fr.read_dump(str(tmp_path / "rank_0"))
    assert caught.value.error_id == "log-unreadable" and "plain values only" in str(caught.value)
    assert not marker.exists()


@pytest.mark.parametrize("data", [b"\x80\x02}q\x00(X", b"\x80\x02K\x05.", b"\x80\x02]q\x00."])
def test_truncated_or_foreign_pickles_are_unreadable_dumps(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "rank_3").write_bytes(data)
    with pytest.raises(ConfigError, match="flight-recorder dump"):
        fr.read_dump(str(tmp_path / "rank_3"))


def test_a_dump_larger_than_the_cap_is_refused_before_reading(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = shutil.copy(DUMPS / "skipped" / "rank_0", tmp_path / "rank_0")
    monkeypatch.setattr(fr, "MAX_DUMP_BYTES", 100)
    with pytest.raises(ConfigError, match="more than the 100"):
        fr.read_dump(str(path))


def test_files_that_are_not_dumps_are_left_to_the_log_reader(tmp_path: Path) -> None:
    import os

    (tmp_path / "rank_0").write_text("NCCL INFO Bootstrap : Using eth1:10.0.0.2<0>\n")
    os.mkfifo(tmp_path / "rank_1")  # never opened: a FIFO is not a dump
    (tmp_path / "notes").write_bytes(b"\x80\x02K\x05.")  # no rank number in the name
    assert fr.dump_files(str(tmp_path)) == []
    assert fr.split([str(tmp_path / "rank_0")]) == ([], [str(tmp_path / "rank_0")])


def test_cli_json_on_a_dumps_directory(run_cli: RunCli) -> None:
    result = run_cli("doctor", "--log", str(DUMPS / "skipped"), "--json")
    assert result.code == ExitCode.FAILURE
    (finding,) = result.json()["findings"]
    assert finding["id"] == "job-hung"
    assert "fr_trace" in finding["fix"]


def test_cli_on_a_corrupt_dump_is_a_finding_not_an_error(run_cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "rank_0").write_bytes(b"\x80\x04\x95garbage")
    result = run_cli("doctor", "--log", str(tmp_path / "rank_0"), "--json")
    assert result.code == ExitCode.OK  # a warning: the other inputs would still be diagnosed
    (finding,) = result.json()["findings"]
    assert finding["id"] == "dump-unreadable" and "pickle data was truncated" in finding["explanation"]


def test_randomly_corrupted_dumps_are_read_or_refused_never_a_crash(tmp_path: Path) -> None:
    import random

    data = (DUMPS / "skipped" / "rank_0").read_bytes()
    rnd = random.Random(20261203)
    path = tmp_path / "rank_0"
    outcomes = {"read": 0, "refused": 0}
    for _ in range(400):
        damaged = bytearray(data)
        for _ in range(rnd.randint(1, 5)):
            damaged[rnd.randrange(len(damaged))] = rnd.randrange(256)
        path.write_bytes(bytes(damaged))
        try:
            fr.analyse([fr.read_dump(str(path))])
            outcomes["read"] += 1
        except ConfigError as exc:
            assert exc.error_id == "log-unreadable"
            outcomes["refused"] += 1
    assert outcomes["read"] and outcomes["refused"]  # both paths were taken
