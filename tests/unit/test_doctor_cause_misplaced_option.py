"""causes/misplaced_option.py: a launcher's option written after the training script's name,
refused by the script's own parser, is invalid-usage. Lines made from CPython's argparse
(Lib/argparse.py, parse_args: self.error(_('unrecognized arguments: %s') % ' '.join(argv)); error:
"%(prog)s: error: %(message)s" after the usage line), prog the script's file name, with options of
torchrun (torch/distributed/run.py's parser), DeepSpeed's runner (launcher/runner.py),
accelerate launch (commands/launch.py) and paddle.distributed.launch."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

USAGE = "usage: {prog} [-h] [--lr LR] [--epochs EPOCHS]"


@pytest.mark.parametrize(("prog", "args", "option"), [
    ("train.py", "--nproc_per_node=2", "--nproc_per_node"),
    ("main.py", "--nnodes 2 --node_rank 0 --master_addr 10.0.0.1", "--nnodes"),
    ("finetune.py", "--epochs 3 --master-port 29501", "--master-port"),
    ("train_ddp.py", "--num_gpus 8", "--num_gpus"),
    ("tools/train.py", "--gpus [2,3,4,6]", "--gpus"),
    ("run_clm.py", "--num_processes 4 --main_process_port 29500", "--num_processes"),
    ("pretrain.py", "--use_env", "--use_env"),
])
def test_a_launcher_option_given_to_the_script(tmp_path: Path, prog: str, args: str,
                                               option: str) -> None:
    name = prog.rsplit("/", 1)[-1]
    found = top(tmp_path, [USAGE.format(prog=name), f"{name}: error: unrecognized arguments: {args}"])
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert option in found.explanation
    assert "before the script's name" in found.fix


@pytest.mark.parametrize("line", [
    "train.py: error: unrecognized arguments: --local-rank=0",  # local-rank-argument's
    "train.py: error: unrecognized arguments: --gpus_per_node 2",  # the script's own, misspelt
    "train.py: error: unrecognized arguments: --nodes 2",
])
def test_other_refused_arguments_are_not_this_cause(tmp_path: Path, line: str) -> None:
    found = top(tmp_path, [USAGE.format(prog="train.py"), line])
    assert "launcher's" not in found.explanation


def test_torchrun_s_own_parser_is_the_launcher_arguments_cause(tmp_path: Path) -> None:
    found = top(tmp_path, ["usage: run.py [-h] [--nnodes NNODES]",
                           "run.py: error: unrecognized arguments: --master_porp 29500"])
    assert found.id == "invalid-usage" and "torchrun refused" in found.explanation
