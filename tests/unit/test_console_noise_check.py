"""The integration tests' check for torch's internals on the console catches what it must."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))

from console_noise import torch_internals  # noqa: E402

CAPTURED = Path(__file__).parent.parent / "fixtures" / "logs" / "captured"


def test_it_finds_every_record_and_frame_of_real_torch_output() -> None:
    text = (CAPTURED / "torchrun_worker_master_no_route.log").read_text()
    found = torch_internals(text)
    assert len(found) == sum(1 for line in text.splitlines()
                             if line.startswith("[W1204") or line.startswith("[E1204")
                             or line.startswith("frame #"))
    prefixed = "\n".join(f"[10.0.0.3:1] [default0]:{line}" for line in text.splitlines())
    assert len(torch_internals(prefixed)) == len(found)


def test_it_passes_ddpkits_own_lines() -> None:
    assert torch_internals("ddpkit: still waiting for the master 10.0.0.2:29500 to answer: "
                           "refused, 5 s\n[default0]:rank 0 all_reduce ok\n"
                           "[default1]:torch warning (ProcessGroupGloo.cpp): odd") == []
    assert torch_internals("W1204 12:00:00.000000 123 file.cpp:12] glog\n[I socket.cpp:9] x") \
        == ["W1204 12:00:00.000000 123 file.cpp:12] glog", "[I socket.cpp:9] x"]


def test_it_finds_torchruns_python_log_records_too() -> None:
    text = (CAPTURED / "torchrun_exit_barrier_race_node1.log").read_text()
    found = torch_internals(text)
    assert sum("api.py:1008]" in line for line in found) == 7
    assert "[default0]:rank 1 all_reduce ok" not in found
