"""ddpkit follows the ranks' log files itself instead of torchrun's --tee (launch/torchrun/rank_output.py)."""

from __future__ import annotations

from pathlib import Path

from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.torchrun.command import follows_rank_output, rank_output_role
from ddpkit.launch.torchrun.rank_output import DISCOVER_EVERY, MAX_LINE, RankOutputTail


def _rank_file(log_dir: Path, run: str, local_rank: int, stream: str = "stdout.log",
               attempt: int = 0) -> Path:
    path = log_dir / run / f"attempt_{attempt}" / str(local_rank) / stream
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    return path


def test_lines_are_prefixed_as_torchruns_tee_and_partial_lines_wait(tmp_path: Path) -> None:
    tail, seen = RankOutputTail(str(tmp_path)), []
    tail._emit = seen.append
    out = _rank_file(tmp_path, "abc_1", 0)
    err = _rank_file(tmp_path, "abc_1", 1, "stderr.log")
    out.write_bytes(b"hello\nhalf")
    err.write_bytes(b"oops\r\n")
    tail.poll()
    assert sorted(seen) == ["[default0]:hello", "[default1]:oops"]
    with out.open("ab") as f:
        f.write(b" done\nlast without newline")
    tail.poll()
    assert seen[-1] == "[default0]:half done"
    tail.poll(final=True)
    assert seen[-1] == "[default0]:last without newline"
    assert len(seen) == 4


def test_a_file_that_appears_later_is_found_within_a_few_polls_and_loses_no_line(tmp_path: Path) -> None:
    tail, seen = RankOutputTail(str(tmp_path)), []
    tail._emit = seen.append
    _rank_file(tmp_path, "r_1", 0).write_bytes(b"rank 0\n")
    tail.poll()
    assert seen == ["[default0]:rank 0"]
    _rank_file(tmp_path, "r_1", 1).write_bytes(b"rank 1 first\nrank 1 second\n")
    for _ in range(DISCOVER_EVERY):
        tail.poll()
    assert seen[1:] == ["[default1]:rank 1 first", "[default1]:rank 1 second"]


def test_the_final_poll_finds_a_file_that_appeared_between_discoveries(tmp_path: Path) -> None:
    tail, seen = RankOutputTail(str(tmp_path)), []
    tail._emit = seen.append
    _rank_file(tmp_path, "r_1", 0).write_bytes(b"a\n")
    tail.poll()
    tail.poll()  # the next look for new files is DISCOVER_EVERY polls after the first
    _rank_file(tmp_path, "r_1", 1, "stderr.log").write_bytes(b"died\n")
    tail.poll()
    assert seen == ["[default0]:a"]
    tail.poll(final=True)
    assert seen == ["[default0]:a", "[default1]:died"]


def test_a_progress_bar_redraw_is_a_line_and_a_split_crlf_is_one_end(tmp_path: Path) -> None:
    tail, seen = RankOutputTail(str(tmp_path), role="trainer"), []
    tail._emit = seen.append
    out = _rank_file(tmp_path, "r_1", 2)
    out.write_bytes(b"10%\r20%\r")
    tail.poll()
    with out.open("ab") as f:
        f.write(b"\nnext\n")
    tail.poll()
    assert seen == ["[trainer2]:10%", "[trainer2]:20%", "[trainer2]:next"]


def test_files_of_an_earlier_start_are_not_shown_again(tmp_path: Path) -> None:
    old = _rank_file(tmp_path, "first_1", 0)
    old.write_bytes(b"from the first start\n")
    tail, seen = RankOutputTail(str(tmp_path)), []
    tail._emit = seen.append
    _rank_file(tmp_path, "second_2", 0).write_bytes(b"from the restart\n")
    _rank_file(tmp_path, "second_2", 0, "error.json")  # not a stream
    with old.open("ab") as f:
        f.write(b"late line of the old run\n")
    tail.poll(final=True)
    assert seen == ["[default0]:from the restart"]


def test_a_line_without_end_is_bounded(tmp_path: Path) -> None:
    tail, seen = RankOutputTail(str(tmp_path)), []
    tail._emit = seen.append
    _rank_file(tmp_path, "r_1", 0).write_bytes(b"x" * (MAX_LINE + 10))
    tail.poll()
    assert len(seen) == 1 and len(seen[0]) == len("[default0]:") + MAX_LINE + 10


def test_start_and_stop_drain_from_a_thread(tmp_path: Path) -> None:
    tail, seen = RankOutputTail(str(tmp_path), interval=0.01), []
    tail.start(seen.append)
    _rank_file(tmp_path, "r_1", 0).write_bytes(b"a\nb")
    tail.stop()
    assert seen == ["[default0]:a", "[default0]:b"]
    assert tail._thread is not None and not tail._thread.is_alive()


def test_ddpkit_follows_unless_the_user_chose_how_torchrun_shows_output() -> None:
    def config(*options: tuple[str, str | None]) -> LaunchConfig:
        return LaunchConfig(nnodes=1, node_rank=0, master_addr="127.0.0.1", entry="t.py",
                            torchrun_options=options)

    assert follows_rank_output(config())
    for flag in ("--tee", "--redirects", "--local-ranks-filter"):
        assert not follows_rank_output(config((flag, "0")))
    assert rank_output_role(config()) == "default"
    assert rank_output_role(config(("--role", "trainer"))) == "trainer"
