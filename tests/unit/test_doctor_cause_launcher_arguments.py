"""causes/launcher_arguments.py: torchrun refusing its own arguments is invalid-usage, and a
shell variable that reached it unexpanded is named. Lines made from CPython's argparse
(Lib/argparse.py, 3.8 to 3.13: ``error()`` exits with "%(prog)s: error: %(message)s";
ArgumentError's "argument %(argument_name)s: %(message)s", whose name joins the option strings
with "/"; parse_args' "unrecognized arguments: %s"; "invalid %(type)s value: %(value)r",
"expected one argument", "invalid choice: %(value)r (choose from ...)", "the following arguments
are required: %s") with torch's parser
(torch/distributed/run.py, get_args_parser: "--node-rank"/"--node_rank", type int; prog
"torchrun", or "run.py"/"launch.py" under python -m)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

USAGE = ["usage: torchrun [-h] [--nnodes NNODES] [--nproc-per-node NPROC_PER_NODE]",
         "                training_script ..."]


@pytest.mark.parametrize(("line", "named"), [
    ("torchrun: error: argument --node-rank/--node_rank: invalid int value: 'node1'",
     "--node-rank 'node1'"),
    ("torchrun: error: argument --nnodes: expected one argument", "--nnodes"),
    ("torchrun: error: argument --start-method/--start_method: invalid choice: 'thread' (choose "
     "from 'spawn', 'fork', 'forkserver')", "--start-method 'thread'"),
    ("torchrun: error: the following arguments are required: training_script, "
     "training_script_args", "training_script"),
    ("run.py: error: argument --master-port/--master_port: invalid int value: '29500:1'",
     "--master-port '29500:1'"),
    ("main/0 launch.py: error: argument --nproc_per_node/--nproc-per-node: expected one argument",
     "--nproc_per_node"),
    # an option it does not have, before the script's name (argparse: "unrecognized arguments:
    # %s"): a misspelt one of torch.distributed.launch's
    ("launch.py: error: unrecognized arguments: --master_porp=8890", "--master_porp '8890'"),
    ("torchrun: error: unrecognized arguments: --nproc-per-nodes", "--nproc-per-nodes"),
])
def test_torchrun_refusing_its_arguments_is_invalid_usage(tmp_path: Path, line: str,
                                                         named: str) -> None:
    found = top(tmp_path, [*USAGE, line])
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert named in found.explanation and "torchrun --help" in found.fix
    assert "expand" not in found.explanation


@pytest.mark.parametrize("variable", ["$NODE_RANK", "${SLURM_NODEID}", "$AWS_BATCH_JOB_NODE_INDEX"])
def test_an_unexpanded_shell_variable_is_named(tmp_path: Path, variable: str) -> None:
    found = top(tmp_path, [*USAGE, "torchrun: error: argument --node-rank/--node_rank: invalid "
                                   f"int value: '{variable}'"])
    assert found.id == "invalid-usage"
    assert f"{variable} reached torchrun as written" in found.explanation
    assert "double quotes" in found.fix


def test_a_scripts_own_parser_is_not_torchruns(tmp_path: Path) -> None:
    # (the training script's parser, prog "train.py", or a script named run.py refusing its own
    # option: not torchrun's arguments)
    for line in ["train.py: error: argument --lr: invalid float value: 'x'",
                 "run.py: error: argument --epochs: invalid int value: 'ten'",
                 "run.py: error: unrecognized arguments: --deepspeed ds.json",
                 "launch.py: error: unrecognized arguments: --local-rank=0"]:
        found = top(tmp_path, ["usage: train.py [-h] [--lr LR]", line])
        assert "torchrun refused" not in found.explanation
