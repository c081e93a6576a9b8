"""Is this node's job hung? A pure decision over samples of each rank's progress signals.

Two signals, both read from outside the ranks (no change to the user's code):

- **output**: the bytes a rank has written to its torchrun log files (stdout.log, stderr.log);
  any growth is progress;
- **CPU time**: user + system time of the rank's process and its descendants (data loader
  workers); a rank that used at least ``busy_fraction`` of one core between two samples is
  computing, which is progress even when it prints nothing.

A rank blocked in a collective that never completes, in ``time.sleep``, on a lock or on a socket
uses (almost) no CPU and prints nothing. The job is hung when *every* rank of this node has been
idle and silent for ``timeout_s``: one rank computing keeps the whole node "alive", so a long
silent computation is never reported. A rank that restarts (new pid) counts as progress.

With several nodes, "every rank" means every rank of the job: each node's watcher adds to one
counter in the job's rendezvous store whenever its own ranks progress, and a change of that
counter (``Sample.job_counter``) is progress for every node. So ranks that wait in a barrier while
a rank on another node computes alone (an evaluation on rank 0) are not reported either. Without
the counter (not reachable yet, or the store is gone) each node decides from its own ranks. Where
the counters are not sealed (:mod:`ddpkit.launch.hang.progress_exchange`), peer progress holds a
verdict off for at most ``HangPolicy.peer_hold_s`` after this node's own last progress.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ddpkit.i18n import _n
from ddpkit.launch.config import DEFAULT_HANG_TIMEOUT

ProgressSignal = Literal["started", "output", "cpu", "peer"]

BUSY_FRACTION = 0.05  # of one core; a blocked rank measures ~0.2-0.5 % (torch's helper threads)


@dataclass(frozen=True)
class RankSample:
    """One rank's progress counters at one instant."""

    local_rank: int
    pid: int
    cpu_s: float  # CPU seconds used so far by the rank and its descendants
    output_bytes: int  # bytes in its log files so far


@dataclass(frozen=True)
class Sample:
    at: float  # a monotonic clock, seconds
    ranks: tuple[RankSample, ...]
    job_counter: int | None = None  # the job-wide progress counter, when it could be read


@dataclass(frozen=True)
class HangPolicy:
    timeout_s: float = DEFAULT_HANG_TIMEOUT  # 0 = never hung
    busy_fraction: float = BUSY_FRACTION
    peer_hold_s: float | None = None  # peer progress counts only this long after local progress
    # ^ set where the job counter is not sealed (anyone who reaches the store can bump it): a hang
    #   report can then be delayed by that long, never silenced


@dataclass(frozen=True)
class RankProgress:
    pid: int
    cpu_s: float
    output_bytes: int
    seen_at: float  # when this rank was last sampled
    progress_at: float  # when it last made progress
    signal: ProgressSignal  # what the last progress was


@dataclass(frozen=True)
class HangState:
    ranks: Mapping[int, RankProgress] = field(default_factory=dict)
    reported: bool = False  # this idle spell was reported already (cleared by any progress)
    job_counter: int | None = None  # its last value seen
    local_progress: bool = False  # this node's own ranks progressed in the last sample
    local_at: float | None = None  # when this node's own ranks last progressed


@dataclass(frozen=True)
class HangVerdict:
    idle_s: float  # how long the most recently active rank has been idle
    ranks: tuple[int, ...]  # the local ranks, all idle
    last_signal: Mapping[int, str]

    def describe(self, timeout_s: float) -> str:
        count = len(self.ranks)
        return _n("its rank made no progress for {idle:.0f} s (--hang-timeout {timeout:g}): no "
                  "output, and no CPU time used", "all {count} ranks made no progress for "
                  "{idle:.0f} s (--hang-timeout {timeout:g}): no output, and no CPU time used",
                  count, idle=self.idle_s, timeout=timeout_s)

    def to_dict(self) -> dict[str, Any]:
        return {"idle_s": round(self.idle_s, 1), "local_ranks": list(self.ranks),
                "last_signal": {str(k): v for k, v in self.last_signal.items()}}


def observe(state: HangState, sample: Sample, policy: HangPolicy) -> HangState:
    """The state after ``sample``: each rank's last progress updated; ranks gone are dropped."""
    ranks: dict[int, RankProgress] = {}
    progressed = False
    for rank in sample.ranks:
        before = state.ranks.get(rank.local_rank)
        signal = _progress(before, rank, sample.at, policy)
        if signal is not None:
            progressed = True
            ranks[rank.local_rank] = RankProgress(rank.pid, rank.cpu_s, rank.output_bytes,
                                                  sample.at, sample.at, signal)
        else:
            assert before is not None
            ranks[rank.local_rank] = replace(before, cpu_s=rank.cpu_s,
                                             output_bytes=rank.output_bytes, seen_at=sample.at)
    if set(ranks) != set(state.ranks):
        progressed = True  # a rank came or went: a new worker group, or one ending
    local = progressed
    local_at = sample.at if local else state.local_at
    counter = sample.job_counter if sample.job_counter is not None else state.job_counter
    held = policy.peer_hold_s is None or local_at is None or \
        sample.at - local_at < policy.peer_hold_s
    if not progressed and held and sample.job_counter is not None \
            and state.job_counter is not None and sample.job_counter != state.job_counter:
        progressed = True  # a rank on another node progressed
        ranks = {k: replace(r, progress_at=sample.at, signal="peer") for k, r in ranks.items()}
    return HangState(ranks=ranks, reported=state.reported and not progressed, job_counter=counter,
                     local_progress=local, local_at=local_at)


def _progress(before: RankProgress | None, now: RankSample, at: float,
              policy: HangPolicy) -> ProgressSignal | None:
    if before is None or before.pid != now.pid:
        return "started"
    if now.output_bytes > before.output_bytes:
        return "output"
    elapsed = at - before.seen_at
    if elapsed > 0 and now.cpu_s - before.cpu_s >= policy.busy_fraction * elapsed:
        return "cpu"
    return None


def verdict(state: HangState, now: float, policy: HangPolicy) -> HangVerdict | None:
    """A verdict when every rank has been idle for the timeout (and it was not reported yet)."""
    if policy.timeout_s <= 0 or not state.ranks or state.reported:
        return None
    idle_s = now - max(r.progress_at for r in state.ranks.values())
    if idle_s < policy.timeout_s:
        return None
    return HangVerdict(idle_s, tuple(sorted(state.ranks)),
                       {k: r.signal for k, r in sorted(state.ranks.items())})


def reported(state: HangState) -> HangState:
    return replace(state, reported=True)


def replay(samples: Sequence[Sample], policy: HangPolicy) -> tuple[HangState, list[float]]:
    """Feed ``samples`` in order; the state at the end and the times a hang was first seen
    (a report is due once per idle spell). For tests and the benchmark."""
    state, seen = HangState(), []
    for sample in samples:
        state = observe(state, sample, policy)
        if verdict(state, sample.at, policy) is not None:
            seen.append(sample.at)
            state = reported(state)
    return state, seen
