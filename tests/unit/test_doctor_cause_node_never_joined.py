"""causes/node_never_joined.py: torchrun's agents waiting for a node rank no agent holds. Sources:
torch v2.13.0 elastic/agent/server/api.py ``_assign_worker_ranks`` (each agent sets
"torchelastic/role_info/<node rank>" and multi_gets every node's) and c10d's store wait,
"wait timeout after %dms, keys: %s" (TCPStore.cpp), raised as torch.distributed.DistStoreError;
the real runs are tests/fixtures/logs/torchrun-sim/dupnode and rank2 (test_doctor_torchrun_sim_runs.py);
node rank 0's agent then sets "torchelastic/assigned_ranks/<node rank>", which the others wait for."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

WAIT = ("torch.distributed.DistStoreError: wait timeout after 30000ms, keys: "
        "{keys}")


@pytest.mark.parametrize("nodes", [2, 4, 16])
def test_the_agents_wait_for_a_node_rank_no_agent_holds(tmp_path: Path, nodes: int) -> None:
    keys = ", ".join(f"/job7/torchelastic/role_info/{n}" for n in range(nodes))
    found = top(tmp_path, ["Traceback (most recent call last):",
                           '  File "/usr/lib/python3/dist-packages/torch/distributed/elastic/'
                           'agent/server/api.py", line 635, in _assign_worker_ranks',
                           WAIT.format(keys=keys)])
    assert (found.id, found.severity) == ("rendezvous-timeout", "error")
    assert f"all {nodes} node ranks (0 to {nodes - 1})" in found.explanation
    assert "--node-rank" in found.fix


def test_another_keys_wait_is_not_this(tmp_path: Path) -> None:
    found = top(tmp_path, [WAIT.format(keys="/default_pg/0//cpu//0/1")])
    assert "node ranks" not in found.explanation


@pytest.mark.parametrize("rank", [1, 2, 7])
def test_an_agent_waiting_for_the_ranks_node_0_hands_out_is_the_same_missing_rank(
        tmp_path: Path, rank: int) -> None:
    # (api.py: node rank 0's agent sets "torchelastic/assigned_ranks/<node rank>" for every node
    # once it holds all their role info; the others store.get their own key)
    found = top(tmp_path, ["Traceback (most recent call last):",
                           '  File "/usr/lib/python3/dist-packages/torch/distributed/elastic/'
                           'agent/server/api.py", line 672, in _assign_worker_ranks',
                           WAIT.format(keys=f"/job7/torchelastic/assigned_ranks/{rank}")])
    assert (found.id, found.severity) == ("rendezvous-timeout", "error")
    assert f"--node-rank {rank} needs --nnodes {rank + 1} or more" in found.explanation
