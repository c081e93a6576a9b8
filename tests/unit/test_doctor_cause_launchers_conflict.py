"""A library refusing a launcher's variables beside a scheduler's (causes/launchers_conflict.py).

The lines are PyTorch Ignite's refusal (ignite/distributed/comp_models/native.py,
setup_env_vars: "Defined env variables '{}' should not be specified with SLURM. Typically, this
happens when `torch.distributed.launch` or `torch.multiprocessing.spawn` are used. Please be sure
to use the `srun` command instead.", the variables formatted as a Python list) raised from idist's
initialisation, with the variables drawn from those torch's launchers set.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

REFUSAL = ("RuntimeError: Defined env variables '{names}' should not be specified with SLURM. "
           "Typically, this happens when `torch.distributed.launch` or "
           "`torch.multiprocessing.spawn` are used. Please be sure to use the `srun` command "
           "instead.")
TRACEBACK = ["Traceback (most recent call last):", '  File "train.py", line 188, in main',
             '    with idist.Parallel(backend="nccl") as parallel:',
             '  File "/opt/conda/lib/python3.10/site-packages/ignite/distributed/comp_models/'
             'native.py", line 219, in setup_env_vars', "    raise RuntimeError("]


@pytest.mark.parametrize("names", [["RANK", "LOCAL_RANK", "WORLD_SIZE"], ["RANK"],
                                   ["WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"]])
def test_a_launchers_variables_beside_slurms_are_a_rendezvous_setting(
        tmp_path: Path, names: list[str]) -> None:
    found = top(tmp_path, [*TRACEBACK, REFUSAL.format(names=str(names))])
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert all(name in found.explanation for name in names)
    assert "SLURM" in found.explanation and "srun" in found.fix


def test_other_refusals_name_no_launcher(tmp_path: Path) -> None:
    # a list of variables that are not a launcher's, and the words in prose
    lines = [*TRACEBACK, REFUSAL.format(names=str(["FOO_BAR", "DATA_ROOT"])),
             "note: RANK should not be specified with SLURM in this tutorial"]
    assert "launcher's variables" not in top(tmp_path, lines).explanation


def test_a_strangers_scheduler_word_is_bounded_and_printed_clean(tmp_path: Path) -> None:
    line = ("RuntimeError: Defined env variables '['RANK']' should not be specified with "
            "SL\x1b]0;t\x07URM\u202e" + "x" * 5000)
    found = top(tmp_path, [*TRACEBACK, line])
    assert "\x1b" not in found.explanation and "\u202e" not in found.explanation
