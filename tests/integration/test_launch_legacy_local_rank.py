"""The seed page's procedure, pasted as it is with only the launcher's name changed, on a 2-node sim
with 2 ranks per node: scripts written for `python -m torch.distributed.launch` (argv
`--local_rank`, `--local-rank`, both) and one written for torchrun (LOCAL_RANK) all run, and every
rank sees its own local rank.

The seed's lines (/work/shared/seed): `python -m torch.distributed.launch --nproc_per_node=1
--nnodes=2 --node_rank=R --master_addr="10.0.0.2" --master_port=55568 ddp.py`, here with
`--nproc_per_node=2` and the sim's eth1 address of node 0.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from multinode import NodeRun, clean_env, ddpkit, simulated, wait_all

from ddpkit.sim.topology import node_argv

pytestmark = [pytest.mark.root, pytest.mark.slow]

SCRIPTS = Path(__file__).parent / "legacy_scripts"
FINISHED = re.compile(r"rank (\d+) local_rank (\d+) finished 3 steps")


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("script", "decision"), [
    ("ddp_underscore.py", "--local_rank=<local rank> (ddp.py:14 declares add_argument('--local_rank'))"),
    ("ddp_dash.py", "--local-rank=<local rank> (ddp.py:15 declares add_argument('--local-rank')"),
    ("ddp_both.py", "--local-rank=<local rank> (ddp.py:15 declares add_argument('--local-rank') "
                    "(it declares both"),
    ("ddp_env.py", "none (ddp.py declares neither --local_rank nor --local-rank"),
])
def test_the_seed_command_with_ddpkit_launch(tmp_path: Path, script: str, decision: str) -> None:
    shutil.copy(SCRIPTS / script, tmp_path / "ddp.py")  # the seed downloads its ddp.py like this
    with simulated(2) as cluster:
        master = cluster.nodes[0].private_address
        runs = []
        for rank in range(2):
            # -v: a "none" decision (torchrun's own way) is said only when asked
            argv = ddpkit("launch", "-v", "--nproc_per_node=2", "--nnodes=2", f"--node_rank={rank}",
                          f"--master_addr={master}", "--master_port=55568", "ddp.py")
            proc = subprocess.Popen(node_argv(cluster, rank, argv), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=clean_env(),
                                    cwd=tmp_path, start_new_session=True)
            runs.append(NodeRun(rank, proc))
        finished = wait_all(runs, timeout=180)
    report = "\n".join(f"--- node {r.index} exit {r.code}\n{r.err[-3000:]}" for r in runs)
    assert finished, "the job did not finish:\n" + report
    seen = set()
    for run in runs:
        assert run.code == 0, report
        flat = " ".join(run.err.split()).replace(" ddpkit: ", " ")  # the line wraps at 100 columns
        assert f"local-rank argument: {decision}" in flat, run.err[-3000:]
        for global_rank, local_rank in FINISHED.findall(run.out):
            seen.add((run.index, int(global_rank), int(local_rank)))
    # node 0 holds ranks 0 and 1, node 1 ranks 2 and 3; each rank saw its own local rank
    assert seen == {(0, 0, 0), (0, 1, 1), (1, 2, 0), (1, 3, 1)}, (seen, report)
