"""causes/barrier_waiting.py: a log that stops while init_process_group's store-based barrier
still counts fewer ranks than the world is rendezvous-timeout (a warning, nothing failed yet);
a barrier that completed is not. Lines made from torch's distributed_c10d.py,
_store_based_barrier: logger.info("Waiting in store based barrier to initialize process group for
rank: {}, key: {} (world_size={}, worker_count={}, timeout={})") in torch 1.10-1.12,
"num_workers_joined={}" (and " error={}") from 1.13; "Rank {}: Completed store-based barrier for
key:{} with {} nodes."; and its timeout, DistStoreError("Timed out initializing process group in
store based barrier on rank {}, for key: {} (world_size={}, num_workers_joined={},
timeout={} error={})")."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

WAITING = ("INFO:torch.distributed.distributed_c10d:Waiting in store based barrier to initialize "
           "process group for rank: {rank}, key: store_based_barrier_key:1 (world_size={world}, "
           "{counted}={count}, timeout=0:30:00{error})")
DONE = ("INFO:torch.distributed.distributed_c10d:Rank {rank}: Completed store-based barrier for "
        "key:store_based_barrier_key:1 with {world} nodes.")


def _waiting(count: int, world: int, counted: str) -> str:
    error = " error=Wait timeout" if counted == "num_workers_joined" else ""
    return WAITING.format(rank=0, world=world, counted=counted, count=count, error=error)


@pytest.mark.parametrize("counted", ["worker_count", "num_workers_joined"])
@pytest.mark.parametrize(("count", "world", "missing"), [(1, 2, "other rank never"),
                                                         (5, 16, "other 11 ranks never")])
def test_a_log_that_stops_in_the_barrier_is_waiting_for_ranks(tmp_path: Path, counted: str,
                                                             count: int, world: int,
                                                             missing: str) -> None:
    found = top(tmp_path, [_waiting(count, world, counted)] * 3)
    assert (found.id, found.severity) == ("rendezvous-timeout", "warning")
    assert f"{count} of the {world} ranks" in found.explanation and missing in found.explanation


def test_a_barrier_that_completed_waits_for_nobody(tmp_path: Path) -> None:
    found = top(tmp_path, [_waiting(1, 2, "num_workers_joined"), DONE.format(rank=0, world=2)])
    assert found.id != "rendezvous-timeout"


def test_the_barriers_timeout_is_an_error(tmp_path: Path) -> None:
    found = top(tmp_path, [_waiting(1, 2, "num_workers_joined"),
                           "torch.distributed.DistStoreError: Timed out initializing process "
                           "group in store based barrier on rank 0, for key: "
                           "store_based_barrier_key:1 (world_size=2, num_workers_joined=1, "
                           "timeout=0:30:00 error=Wait timeout)"])
    assert (found.id, found.severity) == ("rendezvous-timeout", "error")
