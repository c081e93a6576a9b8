"""causes/rank_never_joined.py: a Gloo process group's connect waiting for a rank's address that
never came. Lines made from the programs: torch's store wait timing out ("wait timeout after
<ms>ms, keys: <key>", raised as torch.distributed.DistStoreError), the key as torch and Gloo
build it (distributed_c10d.py: PrefixStore("default_pg"), PrefixStore(f"{group_name}/"),
PrefixStore(f"{device}/"); ProcessGroupGloo: the device's index; gloo/transport/tcp/context.cc:
the rank's number; each prefix joined with "/"), torch's excepthook tag, CPython's traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose

WAIT = "torch.distributed.DistStoreError: wait timeout after {ms}ms, keys: {key}"


def _waiting(rank: int, key: str, ms: int = 1800000) -> list[str]:
    return [f"[rank{rank}]: Traceback (most recent call last):",
            f'[rank{rank}]:   File "train.py", line 12, in <module>',
            f'[rank{rank}]:     dist.init_process_group("gloo")',
            f"[rank{rank}]: " + WAIT.format(ms=ms, key=key)]


@pytest.mark.parametrize(("key", "missing"), [
    ("/default_pg/0//cpu//0/2", "2"),  # the default group, device 0
    ("/default_pg/1//cpu//0/7", "7"),  # a group made by new_group
    ("/default_pg/0//cpu//1/15", "15"),  # a second device of the group
])
def test_the_rank_whose_address_never_came_is_named(tmp_path: Path, key: str,
                                                    missing: str) -> None:
    found = top(tmp_path, [*_waiting(0, key), *_waiting(1, key)])
    assert (found.id, found.severity) == ("rendezvous-timeout", "error")
    assert f"for rank {missing} to publish its address" in found.explanation
    assert f"rank {missing}'s process" in found.fix


def test_the_missing_ranks_own_failure_comes_first(tmp_path: Path) -> None:
    # rank 2 started and failed before init: its own error is the cause, the wait what it did
    key = "/default_pg/0//cpu//0/2"
    found = diagnose_lines(tmp_path, [*_waiting(0, key), *_waiting(1, key),
                                      "[rank2]: Traceback (most recent call last):",
                                      '[rank2]:   File "train.py", line 3, in <module>',
                                      "[rank2]:     import apex",
                                      "[rank2]: ModuleNotFoundError: No module named 'apex'"])
    assert found[0].id == "rank-failed"
    assert "Rank 2 failed on its own account" in found[0].explanation
    assert "rendezvous-timeout" in [f.id for f in found]


@pytest.mark.parametrize("line", [
    # NCCL's unique id under a CUDA device: a counter, not a rank (ProcessGroupNCCL)
    "torch.distributed.DistBackendError: [2] is setting up NCCL communicator and retrieving "
    "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: "
    "wait timeout after 600000ms, keys: /default_pg/0//27//cuda//0",
    # a key of the script's own
    WAIT.format(ms=30000, key="/my_barrier/epoch_3"),
])
def test_other_waits_name_no_rank(tmp_path: Path, line: str) -> None:
    assert "to publish its address" not in top(tmp_path, [line]).explanation


def diagnose_lines(tmp_path: Path, lines: list[str]) -> list[Finding]:
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose([str(log)])
