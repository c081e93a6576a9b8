"""The hang decision over samples (no processes): output or CPU is progress; all idle is hung."""

from __future__ import annotations

from ddpkit.launch.hang.model import HangPolicy, HangState, RankSample, Sample, observe, replay, verdict

POLICY = HangPolicy(timeout_s=15)


def _samples(seconds: int, rank_cpu, rank_out=lambda r, t: 100, ranks=(0, 1), pid=lambda r, t: 100 + r):  # type: ignore[no-untyped-def]
    return [Sample(float(t), tuple(RankSample(r, pid(r, t), rank_cpu(r, t), rank_out(r, t))
                                   for r in ranks)) for t in range(seconds + 1)]


def test_all_ranks_idle_and_silent_is_hung_after_the_timeout() -> None:
    _, seen = replay(_samples(40, lambda r, t: 1.0 + 0.003 * t), POLICY)  # 0.3 % CPU: blocked
    assert seen == [15.0]  # reported once per idle spell


def test_one_rank_computing_silently_keeps_the_node_alive() -> None:
    cpu = lambda r, t: 1.0 + (0.9 * t if r == 1 else 0.0)  # noqa: E731
    _, seen = replay(_samples(600, cpu), POLICY)
    assert seen == []


def test_output_is_progress_even_without_cpu() -> None:
    _, seen = replay(_samples(100, lambda r, t: 1.0, rank_out=lambda r, t: 100 + t // 10), POLICY)
    assert seen == []


def test_progress_ends_a_spell_and_a_new_hang_is_reported_again() -> None:
    out = lambda r, t: 100 if t < 30 else 200  # noqa: E731 - output at t=30
    _, seen = replay(_samples(60, lambda r, t: 1.0, rank_out=out), POLICY)
    assert seen == [15.0, 45.0]


def test_a_restarted_rank_counts_as_progress() -> None:
    pid = lambda r, t: 100 + r + (1000 if t >= 10 else 0)  # noqa: E731
    _, seen = replay(_samples(30, lambda r, t: 1.0, pid=pid), POLICY)
    assert seen == [25.0]


def test_timeout_zero_is_off_and_no_ranks_is_never_hung() -> None:
    _, seen = replay(_samples(400, lambda r, t: 1.0), HangPolicy(timeout_s=0))
    assert seen == []
    state = observe(HangState(), Sample(0.0, ()), POLICY)
    assert verdict(state, 1000.0, POLICY) is None


def test_the_verdict_names_every_rank_and_its_last_signal() -> None:
    samples = _samples(20, lambda r, t: 1.0 + (0.5 * t if t <= 3 else 1.5))
    state = HangState()
    for sample in samples:
        state = observe(state, sample, POLICY)
    found = verdict(state, 20.0, POLICY)
    assert found is not None and found.ranks == (0, 1) and found.last_signal == {0: "cpu", 1: "cpu"}
    assert round(found.idle_s) == 17
    assert "all 2 ranks made no progress for 17 s" in found.describe(15)


def test_a_changing_job_counter_is_progress_from_another_node() -> None:
    samples = [Sample(float(t), (RankSample(0, 100, 1.0, 100),), job_counter=t // 5)
               for t in range(60)]
    _, seen = replay(samples, POLICY)
    assert seen == []  # a rank elsewhere progresses every 5 s
    still = [Sample(float(t), (RankSample(0, 100, 1.0, 100),), job_counter=7) for t in range(30)]
    _, seen = replay(still, POLICY)
    assert seen == [15.0]  # nobody anywhere progresses


def test_local_progress_is_flagged_for_the_exchange_but_peer_progress_is_not() -> None:
    state = observe(HangState(), Sample(0.0, (RankSample(0, 100, 1.0, 100),), 3), POLICY)
    assert state.local_progress  # a new rank
    state = observe(state, Sample(1.0, (RankSample(0, 100, 1.0, 100),), 4), POLICY)
    assert not state.local_progress and state.ranks[0].signal == "peer"
    state = observe(state, Sample(2.0, (RankSample(0, 100, 1.0, 300),), 4), POLICY)
    assert state.local_progress and state.ranks[0].signal == "output"


def test_an_unsealed_counter_bumped_for_ever_delays_a_hang_report_but_cannot_silence_it() -> None:
    """Issue 22: anyone who reaches torchrun's store could keep the counter moving."""
    bumped = [Sample(float(t), (RankSample(0, 100, 1.0, 100),), job_counter=t) for t in range(200)]
    _, seen = replay(bumped, POLICY)
    assert seen == []  # the unbounded (sealed) policy: peer progress is trusted
    held = HangPolicy(timeout_s=POLICY.timeout_s, peer_hold_s=4 * POLICY.timeout_s)
    _, seen = replay(bumped, held)
    # local progress last at 0 s: peer progress counts until 59 s (< 60 s), reported 15 s later
    assert seen == [4 * POLICY.timeout_s - 1 + POLICY.timeout_s]
