"""causes/unique_id_wait.py: a rank that waited in the store for rank 0's ncclUniqueId until the
store's timeout is collective-timeout; a connection's error there stays the catalogue's reading.

Lines from torch's templates: ProcessGroupNCCL.cpp, broadcastUniqueNCCLID (v2.2 on): "[" << rank
<< "] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value
store by key '" << storeKey << "', but store->get('" << storeKey << "') got error: " << e.what(),
raised as a DistBackendError; the store's errors: TCPStore.cpp's "wait timeout after " << ms <<
"ms, keys: " << keys (v2.3 on), the older "Socket Timeout", and a connection's
"Connection reset by peer" (strerror(ECONNRESET))."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

WAIT = ("{head}torch.distributed.DistBackendError: [{rank}] is setting up NCCL communicator and "
        "retrieving ncclUniqueId from [0] via c10d key-value store by key '{key}', but "
        "store->get('{key}') got error: {error}")


@pytest.mark.parametrize("error", ["wait timeout after 600000ms, keys: /default_pg/0//cuda//0",
                                   "Socket Timeout"])
@pytest.mark.parametrize(("head", "rank", "key"), [("", 1, "0"), ("[rank3]: ", 3, "1:2")])
def test_a_wait_that_timed_out_is_ranks_out_of_step(tmp_path: Path, error: str, head: str,
                                                    rank: int, key: str) -> None:
    found = top(tmp_path, [WAIT.format(head=head, rank=rank, key=key, error=error)])
    assert (found.id, found.severity) == ("collective-timeout", "error")
    assert f"'{key}'" in found.explanation and "device_id" in found.fix


def test_a_connection_error_is_no_such_wait(tmp_path: Path) -> None:
    found = top(tmp_path, [WAIT.format(head="", rank=1, key="0",
                                       error="Connection reset by peer")])
    assert found.severity == "error" and found.id != "collective-timeout"
