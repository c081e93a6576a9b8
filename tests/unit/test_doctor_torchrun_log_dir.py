"""torchrun's own --log-dir as `doctor --log` input: the folder (or one start's folder in it)
stands for its ranks' logs. Its layout is torch's (torch/distributed/elastic/multiprocessing/
api.py, DefaultLogsSpecs.reify): a folder per start of the agent, "<rdzv_run_id>_<random>", with
attempt_<restart>/<local rank>/{stdout,stderr}.log and error.json; attempt_<restart>/
filtered_std{out,err}.log repeat some ranks' lines and are not read."""

from __future__ import annotations

import os
from pathlib import Path

from ddpkit.doctor.log.diagnose import diagnose
from ddpkit.doctor.log.run_dir import (
    newest_start,
    silent_rank_logs,
    start_logs,
    torchrun_log_dir_logs,
)
from ddpkit.errors import ConfigError

CLOSED = ("[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection "
          "closed by peer [127.0.0.1]:41234")
OWN = "\n".join(["[rank1]: Traceback (most recent call last):",
                 '[rank1]:   File "train.py", line 41, in <module>', "[rank1]:     main()",
                 "[rank1]: KeyError: 'labels'"])


def _start(log_dir: Path, name: str, attempts: int = 1, ranks: int = 2, mtime: float = 0) -> Path:
    start = log_dir / name
    for attempt in range(attempts):
        for rank in range(ranks):
            folder = start / f"attempt_{attempt}" / str(rank)
            folder.mkdir(parents=True)
            (folder / "stdout.log").write_text("")
            (folder / "stderr.log").write_text("")
            (folder / "error.json").write_text("{}")
        (start / f"attempt_{attempt}" / "filtered_stderr.log").write_text(CLOSED + "\n" + CLOSED)
    if mtime:
        os.utime(start, (mtime, mtime))
    return start


def test_a_start_folder_lists_its_rank_logs_in_attempt_then_rank_order(tmp_path: Path) -> None:
    start = _start(tmp_path, "none_abc", attempts=11, ranks=2)
    logs = start_logs(str(start))
    assert len(logs) == 11 * 2 * 2
    assert logs[0] == str(start / "attempt_0" / "0" / "stderr.log")
    assert logs[4] == str(start / "attempt_1" / "0" / "stderr.log")  # (attempt_10 after attempt_9)
    assert logs[-1] == str(start / "attempt_10" / "1" / "stdout.log")
    assert not any("filtered" in p or p.endswith(".json") for p in logs)


def test_the_log_dir_stands_for_its_newest_start(tmp_path: Path) -> None:
    _start(tmp_path, "none_old", mtime=1_000_000)
    newest = _start(tmp_path, "none_new", mtime=2_000_000)
    assert newest_start(str(tmp_path)) == str(newest)
    assert torchrun_log_dir_logs(str(tmp_path)) == start_logs(str(newest))
    assert torchrun_log_dir_logs(str(newest)) == start_logs(str(newest))
    assert torchrun_log_dir_logs(str(tmp_path / "none_new" / "attempt_0")) == []
    assert torchrun_log_dir_logs(str(tmp_path / "missing")) == []


def test_doctor_reads_a_log_dir_as_its_ranks_logs(tmp_path: Path) -> None:
    start = _start(tmp_path, "none_abc")
    (start / "attempt_0" / "0" / "stderr.log").write_text(CLOSED + "\n")
    (start / "attempt_0" / "1" / "stderr.log").write_text(OWN + "\n")
    top = diagnose([str(tmp_path)])[0]
    assert (top.id, top.severity) == ("rank-failed", "error")
    assert "Rank 1 failed on its own account" in top.explanation
    # the filtered copy of rank 0's lines was not read: one consequence line, from its own file
    assert [(e.file, e.line) for e in top.evidence] == [
        (str(start / "attempt_0" / "1" / "stderr.log"), 4),
        (str(start / "attempt_0" / "0" / "stderr.log"), 1)]


def test_another_folder_is_refused_naming_both_layouts_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "slurm-123.out").write_text("x\n")
    try:
        diagnose([str(tmp_path)])
    except ConfigError as exc:
        assert exc.error_id == "log-unreadable"
        assert "torchrun.log" in str(exc) and "--log-dir" in str(exc)
        assert f"{tmp_path}/*.log" in exc.hint
    else:
        raise AssertionError("a plain folder was read")


def test_an_empty_stderr_beside_a_peer_gone_names_its_rank(tmp_path: Path) -> None:
    # torch's layout, Gloo's own words for a closed connection (pair.cc), and local rank 2's
    # stderr left empty: a process killed, crashed in native code or returned early says nothing
    start = _start(tmp_path, "none_abc", ranks=3)
    for rank in (0, 1):
        (start / "attempt_0" / str(rank) / "stderr.log").write_text(CLOSED.replace(
            "rank0", f"rank{rank}") + "\n")
    files = start_logs(str(start))
    assert silent_rank_logs(files) == {str(start / "attempt_0" / "2" / "stderr.log"): 2}
    top = diagnose([str(tmp_path)])[0]
    assert (top.id, top.severity) == ("rank-failed", "error")
    assert top.explanation.startswith("Local rank 2's stderr (") and "is empty" in top.explanation
    assert "connection-lost" not in [f.id for f in diagnose([str(tmp_path)])]


def test_empty_stderr_files_say_nothing_alone(tmp_path: Path) -> None:
    # every rank's stderr empty (a run that printed nothing, or stderr not redirected): no rank
    # is told apart; and an empty stderr beside another rank's own error is not the cause
    start = _start(tmp_path, "none_abc", ranks=2)
    assert silent_rank_logs(start_logs(str(start))) == {}
    (start / "attempt_0" / "0" / "stderr.log").write_text(OWN.replace("rank1", "rank0") + "\n")
    (start / "attempt_0" / "0" / "stdout.log").write_text("step 1\n")
    assert list(silent_rank_logs(start_logs(str(start))).values()) == [1]
    top = diagnose([str(tmp_path)])[0]
    assert top.id != "rank-failed" or "Local rank 1's stderr" not in top.explanation


def test_an_empty_stderr_without_a_lost_peer_names_nothing(tmp_path: Path) -> None:
    # rank 0 timed out waiting (Gloo's timeout, not a closed connection): rank 1 may be hanging,
    # and its empty stderr does not say it ended
    start = _start(tmp_path, "none_abc", ranks=2)
    (start / "attempt_0" / "0" / "stderr.log").write_text(
        "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
        "Timed out waiting 5000ms for recv operation to complete\n")
    found = diagnose([str(tmp_path)])
    assert found[0].id == "collective-timeout"
    assert not any("Local rank 1's stderr" in f.explanation for f in found)


def test_a_later_attempts_empty_stderr_is_not_the_lost_peer_of_an_earlier_one(tmp_path: Path
                                                                                ) -> None:
    # attempt 0: rank 0 lost its peer, both printed; attempt 1: rank 0 printed nothing (torchrun
    # stopped it while it waited), rank 1 a line of its own
    start = _start(tmp_path, "none_abc", attempts=2, ranks=2)
    (start / "attempt_0" / "0" / "stderr.log").write_text(CLOSED + "\n")
    (start / "attempt_0" / "1" / "stderr.log").write_text("[rank1]: started\n")
    (start / "attempt_1" / "1" / "stderr.log").write_text("[rank1]: started again\n")
    assert list(silent_rank_logs(start_logs(str(start))).values()) == [0]
    assert not any("Local rank 0's stderr" in f.explanation for f in diagnose([str(tmp_path)]))


def test_a_fifo_among_the_rank_logs_is_not_an_empty_log(tmp_path: Path) -> None:
    # a FIFO reads as no size: it is read as any FIFO is (a bounded wait for its writer), never
    # called a rank that printed nothing
    start = _start(tmp_path, "none_abc", ranks=2)
    (start / "attempt_0" / "0" / "stderr.log").write_text(CLOSED + "\n")
    fifo = start / "attempt_0" / "1" / "stderr.log"
    fifo.unlink()
    os.mkfifo(fifo)
    assert silent_rank_logs(start_logs(str(start))) == {}
