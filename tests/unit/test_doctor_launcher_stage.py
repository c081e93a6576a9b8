"""A log that stops after a launcher started the run's processes stops partway (no-result), and
a launcher's refusal of its settings is named. Sources of the lines: DeepSpeed v0.19.5
deepspeed/launcher/launch.py (logger.info: "WORLD INFO DICT: {world_info}", "nnodes={},
num_local_procs={}, node_rank={}", "process {pid} spawned with command: {cmd}"; logged through
DeepSpeed's logger as "[<time>] [INFO] [launch.py:<n>:main] ...") and runner.py (``raise
ValueError("Hostfile is empty or not formatted correctly, unable to proceed with launching.")``);
Horovod v0.28.1 horovod/runner/common/util/hosts.py (``raise ValueError('Invalid host input,
please make sure it has format as : worker-0:2,worker-1:2.')``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

HEAD = "[2024-01-01 10:00:01,000] [INFO] [launch.py:{line}:main] "
STARTED = [HEAD.format(line=145) + "WORLD INFO DICT: {'localhost': [0, 1]}",
           HEAD.format(line=151) + "nnodes=1, num_local_procs=2, node_rank=0",
           HEAD.format(line=256) + "process 12345 spawned with command: ['/usr/bin/python', "
                                   "'-u', 'train.py', '--local_rank=0']"]


def test_a_log_that_stops_after_the_launcher_started_is_no_result(tmp_path: Path) -> None:
    found = top(tmp_path, STARTED)
    assert (found.id, found.severity) == ("no-result", "warning")
    assert "deepspeed's launcher" in found.explanation


@pytest.mark.parametrize("line", [
    "ValueError: Hostfile is empty or not formatted correctly, unable to proceed with launching.",
    "ValueError: Invalid host input, please make sure it has format as : worker-0:2,worker-1:2.",
])
def test_a_launcher_refusing_its_settings_is_named(tmp_path: Path, line: str) -> None:
    found = top(tmp_path, ["Traceback (most recent call last):",
                           '  File "/usr/local/bin/deepspeed", line 6, in <module>', line])
    assert (found.id, found.severity) == ("rendezvous-config", "error")
