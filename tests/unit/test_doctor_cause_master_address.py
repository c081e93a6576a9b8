"""causes/master_address.py: a job over several machines given a master address the other
machines cannot reach. The lines are the launchers' own templates: DeepSpeed v0.19.5
deepspeed/launcher/runner.py (``logger.info(f"cmd = {' '.join(cmd)}")``, the command holding
``--master_addr=X``) and launch.py (``nnodes={}, num_local_procs={}, node_rank={}``, its
sigkill_handler's ``Main process received SIGTERM, exiting``); torch v2.3.0
torch/distributed/launcher/api.py, launch_agent's launch configs (``master_addr      : X``); a
shell's ``MASTER_ADDR=X``. Address classes: RFC 5735 (127/8, 169.254/16) and Docker's default
bridge (172.17.0.0/16)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

STAMP = "[2024-05-01 10:00:00,000] [INFO]"
DS_CMD = (STAMP + " [runner.py:618:main] cmd = /usr/bin/python3 -u -m deepspeed.launcher.launch "
          "--world_info=eyJ9 --master_addr={address} --master_port=29500 --node_rank=1 train.py")
DS_NODES = STAMP + " [launch.py:158:main] nnodes=2, num_local_procs=8, node_rank=1"
DS_STOP = STAMP + " [launch.py:262:sigkill_handler] Main process received SIGTERM, exiting"
ELASTIC = ["INFO:torch.distributed.launcher.api:Starting elastic_operator with launch configs:",
           "  entrypoint       : train.py", "  min_nodes        : 2", "  max_nodes        : 2",
           "  master_addr      : {address}", "  master_port      : 29500",
           "[2024-05-01 10:05:00,000] torch.distributed.elastic.agent.server.api: [WARNING] "
           "Received Signals.SIGTERM death signal, shutting down workers"]


@pytest.mark.parametrize("address", ["172.17.0.4", "127.0.0.1", "localhost", "169.254.3.7"])
@pytest.mark.parametrize("launcher", ["deepspeed", "torchrun"])
def test_an_unreachable_master_address_in_a_job_over_machines(
        tmp_path: Path, address: str, launcher: str) -> None:
    lines = ([DS_CMD.format(address=address), DS_NODES, DS_STOP] if launcher == "deepspeed"
             else [line.format(address=address) for line in ELASTIC])
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("wrong-interface", "error")
    assert address in found.explanation
    assert "ddpkit nics" in found.fix


@pytest.mark.parametrize("address", ["10.0.0.2", "192.168.1.20", "47.100.1.2"])
def test_a_master_address_between_machines_is_not_read_so(tmp_path: Path, address: str) -> None:
    found = top(tmp_path, [DS_CMD.format(address=address), DS_NODES, DS_STOP])
    assert found.id != "wrong-interface"


def test_one_machine_may_use_loopback(tmp_path: Path) -> None:
    found = top(tmp_path, [DS_CMD.format(address="127.0.0.1"),
                           STAMP + " [launch.py:158:main] nnodes=1, num_local_procs=2, "
                           "node_rank=0", DS_STOP])
    assert found.id != "wrong-interface"
