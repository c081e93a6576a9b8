"""causes/rdma_completion.py: rdma-core's mlx5 provider reporting a failed work completion is
ib-error. Source: rdma-core v50.0 providers/mlx5/cq.c, ``fprintf(fp, PFX "%s: got completion
with error:\\n", mctx->hostname)`` (PFX is "mlx5: "), then dump_cqe()'s lines of four 32-bit
words in hex; a flush (IBV_WC_WR_FLUSH_ERR) or a retry-exceeded syndrome is not printed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

CQE = ["00000000 00000000 00000000 00000000", "00000000 00000000 00000000 00000000",
       "00000007 00000000 00000000 00000000", "00000000 9d005304 08000243 0001c0d2"]


@pytest.mark.parametrize("host", ["node-a", "gpu-07.cluster.local"])
def test_a_failed_completion_is_ib_error(tmp_path: Path, host: str) -> None:
    found = top(tmp_path, ["step 100 loss 2.31", f"mlx5: {host}: got completion with error:",
                           *CQE])
    assert (found.id, found.severity) == ("ib-error", "error")
    assert "mlx5" in found.explanation


def test_the_words_without_the_providers_prefix_are_not_this_cause(tmp_path: Path) -> None:
    found = top(tmp_path, ["the request got completion with error: see above"])
    assert found.id != "ib-error"
