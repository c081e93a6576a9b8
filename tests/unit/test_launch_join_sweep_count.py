"""The master's warning about keys someone else put in the job store counts what it left (issue
32): with more foreign keys than its bounded sweeps reached, it said "all ... removed" while tens
of thousands were still there. Against a real c10d TCPStore on loopback."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest

from ddpkit.launch.job import JobSpec
from ddpkit.launch.join import sides as join
from ddpkit.launch.join.driver import _warn_about_strangers
from ddpkit.launch.join.store import SWEEP_BATCH, host_store
from ddpkit.launch.join.tokens import new_token

pytest.importorskip("torch")


@pytest.fixture
def master(tcp_port: int) -> Iterator[join.MasterSide]:
    store = host_store(new_token("127.0.0.1", tcp_port))
    job = JobSpec(command="launch", nnodes=2, entry=("train.py",))
    side = join.MasterSide(store, join.JoinJob(job=job, master_addr="127.0.0.1", env={},
                                               join_timeout=5, ddpkit_version="x"))
    side.publish()
    yield side
    del side, store


class _Events:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warning(self, message: str) -> None:
        self.warnings.append(message)


@pytest.mark.timeout(120)
def test_keys_left_after_the_bounded_sweeps_are_counted(master: join.MasterSide) -> None:
    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    attacker = TCPStore("127.0.0.1", master.store.token.port, None, False,
                        datetime.timedelta(seconds=10))
    flood = 2 * SWEEP_BATCH + 1000
    for i in range(flood):
        attacker.set(f"flood/{i}", b"x")
    attacker.get(f"flood/{flood - 1}")  # a set is not answered: a get behind it is, after it
    master.sweep()  # one bounded sweep while the job ran
    events = _Events()
    _warn_about_strangers(master, events)  # (its own last sweep takes another batch)
    [warning] = events.warnings
    assert (f"{flood} key(s) this job never wrote; all were ignored, {2 * SWEEP_BATCH} of the "
            "keys removed and 1000 still there") in warning, warning
    assert "all were ignored and removed" not in warning


@pytest.mark.timeout(60)
def test_all_removed_only_when_none_is_left(master: join.MasterSide) -> None:
    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    attacker = TCPStore("127.0.0.1", master.store.token.port, None, False,
                        datetime.timedelta(seconds=10))
    for i in range(30):
        attacker.set(f"flood/{i}", b"x")
    attacker.get("flood/29")  # a set is not answered: a get behind it is, after it
    events = _Events()
    _warn_about_strangers(master, events)
    [warning] = events.warnings
    assert "30 key(s) this job never wrote; all were ignored and removed" in warning, warning
