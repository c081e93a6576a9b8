"""MPICH's mpiexec refusing an option it does not have: invalid-usage.

MPICH's process manager, Hydra, matches each option of mpiexec against its table
(utils/args/args.c, match_arg) and fails on one it lacks: "[mpiexec@<host>] match_arg
(./utils/args/args.c:160): unrecognized argument <option>", then "unable to parse user
arguments" and "error parsing parameters"; no process starts. Scripts written for Open MPI's
mpirun pass options Hydra does not have (--noprefix, --allow-run-as-root, -x VAR, --oversubscribe):
the mpiexec found first on the PATH is another MPI's than the script was written for.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, NotingValues, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import FactKind
from ddpkit.i18n import _


class MpiLauncherArguments(NotingValues):
    needs = frozenset({FactKind.MPI_LAUNCHER_ARGUMENT})
    specificity = 20
    supersedes = GENERIC

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text = _("MPICH's mpiexec (Hydra) refused an option it does not have ({options}) and "
                 "started no process: an option of another MPI's launcher (Open MPI's "
                 "--noprefix, --allow-run-as-root, -x VAR) or a misspelt one.",
                 options=self.listed)
        fix = _("Use the options of the mpiexec that runs (mpiexec --version names its MPI; "
                "MPICH's takes -genv VAR VALUE, -hosts, -ppn), or put the MPI the command was "
                "written for first on the PATH (which mpiexec).")
        return made("invalid-usage", "error", text, fix, merge(self.bag.items))
