"""What a healthy 2-node `ddpkit launch` prints by default before the script's own output (issue
31): at most 8 lines of ddpkit's per node, every line within 100 columns, no torch internals; `-v`
shows the values set and the local-rank decision. stdout and stderr are read as one stream, in the
order the node wrote them."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
from console_noise import assert_quiet_console
from multinode import NodeRun, clean_env, ddpkit, simulated, wait_all

from ddpkit.sim.topology import node_argv

pytestmark = [pytest.mark.root, pytest.mark.slow]

SCRIPT = textwrap.dedent("""
    import datetime, os, torch, torch.distributed as dist
    print("script: started", flush=True)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    t = torch.ones(2)
    dist.all_reduce(t)
    print(f"script: rank {dist.get_rank()} ok", flush=True)
    dist.destroy_process_group()
""")
MOST_LINES = 8


def _launch(cluster, tmp_path: Path, *flags: str) -> list[NodeRun]:  # type: ignore[no-untyped-def]
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    master = cluster.nodes[0].private_address
    runs = []
    for node in range(2):
        argv = ddpkit("launch", *flags, "--nnodes", "2", "--node-rank", str(node),
                      "--master-addr", master, "--master-port", "29531", "--run-dir",
                      str(tmp_path / f"run{node}{''.join(flags)}"), str(script))
        proc = subprocess.Popen(node_argv(cluster, node, argv), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=clean_env(),
                                start_new_session=True)
        runs.append(NodeRun(node, proc))
    assert wait_all(runs, timeout=150), "\n".join(r.out[-2000:] for r in runs)
    for run in runs:
        assert run.code == 0, run.out[-3000:]
    return runs


def _before_script(text: str) -> list[str]:
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if "script: started" in line)
    return lines[:first]


@pytest.mark.timeout(400)
def test_a_healthy_job_says_little_before_the_script_and_fits_100_columns(
        tmp_path: Path, assert_fits) -> None:  # type: ignore[no-untyped-def]
    with simulated(2) as cluster:
        quiet = _launch(cluster, tmp_path)
        verbose = _launch(cluster, tmp_path, "-v")
    for run in quiet:
        before = _before_script(run.out)
        assert len(before) <= MOST_LINES, f"node {run.index}:\n" + "\n".join(before)
        assert_fits(run.out)
        assert_quiet_console(run.out)
        said = " ".join(run.out.split())
        assert "inter-node interface eth1" in said
        assert "set GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME" in said
        assert "GLOO_SOCKET_IFNAME=eth1" not in said and "TORCH_FR_DUMP_TEMP_FILE" not in said
        assert "local-rank argument" not in said  # none is passed: torchrun's own way
    for run in verbose:
        assert "ddpkit:   GLOO_SOCKET_IFNAME=eth1" in run.out
        assert "TORCH_FR_DUMP_TEMP_FILE=" in run.out and "local-rank argument: none" in run.out
