"""A launcher's option written after the training script's name: the script's parser refuses it.

A launcher parses the options before the script's name and passes every argument after it to
the script (torchrun: "training_script_args", argparse.REMAINDER; DeepSpeed's runner,
accelerate launch and paddle.distributed.launch the same). An option of the launcher's written
after the script's name ("torchrun train.py --nproc_per_node 2", a --gpus list after
tools/train.py) reaches the script, whose own argparse ends it: "train.py: error: unrecognized
arguments: --nproc_per_node 2" (the facts' ``MISPLACED_OPTION``). The launcher ran with its
defaults, and every process it started exits on that error: invalid-usage, the command's
order. (A script's parser refusing --local-rank is local-rank-argument's.)
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.log.causes.base import NotingValues
from ddpkit.doctor.log.facts.kinds import FactKind
from ddpkit.i18n import _


class MisplacedOption(NotingValues):
    needs = frozenset({FactKind.MISPLACED_OPTION})
    specificity = 15
    finding_id = "invalid-usage"
    supersedes = GENERIC

    def words(self) -> tuple[str, str]:
        text = _("The training script's own parser refused {options}, an option of the "
                 "launcher's: it was written after the script's name, so the launcher passed it "
                 "to the script and ran with its defaults.", options=self.listed)
        fix = _("Put the launcher's options before the script's name and the script's after it: "
                "torchrun --nproc-per-node 2 train.py --lr 0.1 (ddpkit launch --dry-run prints "
                "the command it would run).")
        return text, fix
