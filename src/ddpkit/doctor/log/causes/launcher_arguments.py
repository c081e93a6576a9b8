"""torchrun refusing its own arguments: invalid-usage.

torchrun's options are parsed by CPython's argparse (torch/distributed/run.py, get_args_parser),
which ends the launcher at once with "torchrun: error: <message>" (prog "run.py" or "launch.py"
under ``python -m torch.distributed.run``/``launch``): "argument --node-rank/--node_rank: invalid
int value: '<v>'", "argument --rdzv-backend: expected one argument", "argument --start-method:
invalid choice: '<v>' (choose from ...)", "the following arguments are required:
training_script". No worker starts. A value that is a shell variable as written ("$NODE_RANK",
"${SLURM_NODEID}") reached torchrun unexpanded: it was in single quotes, set in another shell than
the one that ran torchrun, or written for a scheduler that expands it in its own job file only.
(A training script's own parser refusing ``--local-rank`` is local-rank-argument's.)
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, keep_few, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _
from ddpkit.wording import lines


class LauncherArguments(Noting):
    needs = frozenset({FactKind.LAUNCHER_ARGUMENT})
    specificity = 20
    supersedes = GENERIC

    def __init__(self) -> None:
        super().__init__()
        self.unexpanded: dict[str, None] = {}  # values that are a shell variable as written

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        mine = [f for f in facts if f.kind is FactKind.LAUNCHER_ARGUMENT]
        keep_few(self.unexpanded, [f.detail for f in mine if f.detail.startswith("$")])
        self.note(event, [f"{f.value} '{f.detail}'" if f.detail else f.value for f in mine])

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        texts = [_("torchrun refused its own arguments ({arguments}) and started no worker.",
                   arguments=self.listed)]
        fixes = [_("Give each option as torchrun --help lists it, with a value of its type "
                   "(--node-rank 0, --nnodes 2, --master-port 29500); the script's own "
                   "arguments go after the script's name.")]
        if self.unexpanded:
            texts.append(_("{values} reached torchrun as written: the shell did not expand the "
                           "variable (it was in single quotes, set in another shell, or is one "
                           "the scheduler sets only in its own job script).",
                           values=", ".join(self.unexpanded)))
            fixes.append(_("Put the variable in double quotes, or export it in the shell that "
                           "runs torchrun, and check it first: echo \"$NODE_RANK\"."))
        return made("invalid-usage", "error", texts, lines(fixes), merge(self.bag.items))
