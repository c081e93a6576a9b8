"""A rank the command line was to give the script, given empty: the variable it names was unset.

A script that takes its rank or the job's size as options ("--rank", "--node_rank",
"--world_size", "--nnodes") is handed them by the command that starts it, most often from a
variable of the shell, the scheduler or the job's spec ("--rank=$RANK", '--rank "${NODE_RANK}"').
The shell expands a variable that is unset, or set in another shell, to nothing, and the script's
argparse ends the process: "train.py: error: argument --rank: invalid int value: ''" (an empty
string's repr), or, the option unquoted and followed by another, "argument --rank: expected one
argument" (the facts' ``EMPTY_RANK_VALUE``). That process never got a rank: rank-assignment,
a rank missing. (torchrun's own options given so are launcher_arguments.py's.)
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.log.causes.base import NotingValues
from ddpkit.doctor.log.facts.kinds import FactKind
from ddpkit.i18n import _


class EmptyRankValue(NotingValues):
    needs = frozenset({FactKind.EMPTY_RANK_VALUE})
    specificity = 20
    finding_id = "rank-assignment"
    supersedes = GENERIC

    def words(self) -> tuple[str, str]:
        text = _("The training script's own parser got no value for {options}: the variable the "
                 "command line puts there (--rank=$RANK) was empty or unset in the shell, "
                 "scheduler or job spec that started it, so the process never got its rank.",
                 options=self.listed)
        fix = _("Set the variable where the script is started, with each process's own value "
                "(0..N-1), and check it with echo before the command; or let a launcher hand "
                "each process its rank: ddpkit launch or torchrun set RANK, WORLD_SIZE and "
                "LOCAL_RANK in the environment for the script to read.")
        return text, fix
