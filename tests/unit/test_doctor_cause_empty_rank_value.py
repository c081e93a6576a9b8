"""causes/empty_rank_value.py: a training script's own parser given no value for an option that
carries its rank or the job's size is rank-assignment. Lines made from CPython's argparse
(Lib/argparse.py: _get_value's "invalid %(type)s value: %(value)r" for a value its type refuses,
the value an empty string where the shell expanded an unset variable; _match_argument's "expected
one argument" where the option meets the next option; ArgumentError's "argument %s: %s" with the
action's option strings joined by "/"; error(): "%(prog)s: error: %(message)s" after the usage
line), prog the script's file name."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

USAGE = "usage: {prog} [-h] [--batch-size N] [--world-size WORLD_SIZE] [--rank RANK]"


@pytest.mark.parametrize(("prog", "argument", "refusal", "option"), [
    ("pytorch_mnist.py", "--rank", "invalid int value: ''", "--rank"),
    ("train.py", "--node_rank", "invalid int value: ''", "--node_rank"),
    ("main.py", "--world-size/--world_size", "invalid int value: ''", "--world-size"),
    ("finetune.py", "-n/--nnodes", "expected one argument", "--nnodes"),
    ("run.sh.py", "--machine-rank", "expected one argument", "--machine-rank"),
    ("pretrain.py", "--global_rank", "invalid int value: ''", "--global_rank"),
])
@pytest.mark.parametrize("tag", ["", "[default0]:"])
def test_a_rank_option_given_nothing(tmp_path: Path, prog: str, argument: str, refusal: str,
                                     option: str, tag: str) -> None:
    found = top(tmp_path, [tag + USAGE.format(prog=prog),
                           f"{tag}{prog}: error: argument {argument}: {refusal}"])
    assert (found.id, found.severity) == ("rank-assignment", "error")
    assert option in found.explanation
    assert "unset" in found.explanation


@pytest.mark.parametrize("line", [
    # a value given and refused: no unset variable
    "train.py: error: argument --rank: invalid int value: 'zero'",
    # torchrun's own parser: launcher_arguments.py's
    "torchrun: error: argument --node-rank/--node_rank: invalid int value: ''",
    # the local rank is the launcher's to give: local-rank-argument's
    "train.py: error: argument --local_rank: expected one argument",
    # not an option for a rank
    "train.py: error: argument --lr: expected one argument",
    "train.py: error: argument --rank-loss: invalid float value: ''",
])
def test_other_refusals_are_not_a_missing_rank(tmp_path: Path, line: str) -> None:
    found = top(tmp_path, [USAGE.format(prog="train.py"), line])
    assert found.id != "rank-assignment"
