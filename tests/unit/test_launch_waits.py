"""Every wait says what it waits for (issue 21): the phase read from torchrun's process state, and
the first status line 5 s into it, then one per 10 s (ddpkit.launch.node.waits)."""

from __future__ import annotations

from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.node.waits import (
    EXIT_BARRIER,
    RENDEZVOUS,
    WaitAnnouncer,
    WaitPhase,
    describe_wait,
    phase_of,
)
from ddpkit.launch.torchrun.processes import ProcessState


def test_the_phase_is_read_from_the_ranks() -> None:
    assert phase_of(ProcessState(3.0, False, 0)) == RENDEZVOUS
    assert phase_of(ProcessState(9.0, True, 2)) is None  # ranks run: the hang watcher's part
    assert phase_of(ProcessState(12.0, True, 0)) == EXIT_BARRIER


def test_lines_come_five_seconds_into_a_phase_then_every_ten() -> None:
    said: list[tuple[WaitPhase, float]] = []

    def describe(phase: WaitPhase, seconds: float) -> str:
        said.append((phase, round(seconds)))
        return f"{phase} {seconds:.0f}"

    waits = WaitAnnouncer(describe)
    t0 = 100.0
    lines = [waits.observe(ProcessState(s, False, 0), t0 + s) for s in range(0, 27)]
    assert [line for line in lines if line] == ["rendezvous 5", "rendezvous 15", "rendezvous 25"]
    for s in range(27, 40):  # the ranks run: nothing to say
        assert waits.observe(ProcessState(s, True, 2), t0 + s) is None
    ended = [waits.observe(ProcessState(s, True, 0), t0 + s) for s in range(40, 62)]
    assert [line for line in ended if line] == ["exit-barrier 5", "exit-barrier 15"]
    # the rendezvous clock is torchrun's own: a first state seen late is not a fresh start
    late = WaitAnnouncer(describe)
    assert late.observe(ProcessState(7.0, False, 0), 50.0) == "rendezvous 7"


def test_the_words_name_what_is_awaited_and_the_limit() -> None:
    master = LaunchConfig(nnodes=3, node_rank=0, master_addr="10.0.0.2", entry="t.py",
                          rdzv_timeout=600)
    text = describe_wait(master)(RENDEZVOUS, 15)
    assert text == ("waiting for the other 2 nodes (node rank 1..2) to join the rendezvous at "
                    "10.0.0.2:29500: 15 s of --rdzv-timeout 600 s")
    barrier = describe_wait(master)(EXIT_BARRIER, 25)
    assert barrier is not None and "exit barrier, up to 300 s" in barrier and "25 s" in barrier
    worker = LaunchConfig(nnodes=2, node_rank=1, master_addr="10.0.0.2", entry="t.py")
    answered = {"yes": False}
    words = describe_wait(worker, master_answered=lambda: answered["yes"])
    assert "still waiting for the master 10.0.0.2:29500 to answer" in str(words(RENDEZVOUS, 5))
    answered["yes"] = True
    assert "answered; waiting for every node to join" in str(words(RENDEZVOUS, 15))
    one = LaunchConfig(nnodes=1, node_rank=0, master_addr="127.0.0.1", entry="t.py")
    assert describe_wait(one)(RENDEZVOUS, 5) is None and describe_wait(one)(EXIT_BARRIER, 5) is None


def test_a_rank_log_file_counts_as_ranks_started(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A rank that started and ended between two scans of the process tree left its log file:
    the tail has found it, so the node is in the exit barrier, not still at the rendezvous."""
    from ddpkit.launch.torchrun.rank_output import RankOutputTail

    tail = RankOutputTail(str(tmp_path))
    assert not tail.found_any
    rank_dir = tmp_path / "run-id" / "attempt_0" / "0"
    rank_dir.mkdir(parents=True)
    (rank_dir / "stdout.log").write_text("done\n")
    tail.poll()
    assert tail.found_any


def test_while_ranks_run_a_running_describer_is_said_like_a_wait() -> None:
    """`ddpkit test` passes what its ranks are doing: said 5 s after they start, then every 10 s,
    and the exit barrier after them is still the wait's own words."""
    running_said: list[float] = []

    def running(seconds: float) -> str:
        running_said.append(round(seconds))
        return f"testing {seconds:.0f}"

    waits = WaitAnnouncer(lambda phase, seconds: f"{phase} {seconds:.0f}", running=running)
    t0 = 10.0
    for s in range(0, 3):
        waits.observe(ProcessState(s, False, 0), t0 + s)
    lines = [waits.observe(ProcessState(s, True, 2), t0 + s) for s in range(3, 30)]
    assert [line for line in lines if line] == ["testing 5", "testing 15", "testing 25"]
    barrier = [waits.observe(ProcessState(s, True, 0), t0 + s) for s in range(30, 36)]
    assert [line for line in barrier if line] == ["exit-barrier 5"]
