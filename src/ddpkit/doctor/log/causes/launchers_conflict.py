"""Two launchers' settings in one process: a library refuses the launch variables beside a
scheduler's.

A process started by torchrun (or torch.distributed.launch, torch.multiprocessing.spawn) gets its
rank from RANK, LOCAL_RANK and WORLD_SIZE; one that Slurm's srun starts gets it from SLURM_PROCID,
SLURM_LOCALID and SLURM_NTASKS. A library that reads either (PyTorch Ignite's idist:
ignite/distributed/comp_models/native.py, setup_env_vars, "Defined env variables '[...]' should
not be specified with SLURM. ...") refuses a process that has both, as it cannot tell which of
them assigns the ranks: torchrun started inside an srun step, or a container hook of the cluster
that exports the launch variables into every task (NVIDIA's enroot/pyxis) does that (the facts'
``LAUNCHERS_CONFLICT``).
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.log.causes.base import NotingValues
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class LaunchersConflict(NotingValues):
    needs = frozenset({FactKind.LAUNCHERS_CONFLICT})
    specificity = 20
    finding_id = "rendezvous-config"
    supersedes = GENERIC

    def __init__(self) -> None:
        super().__init__()
        self.scheduler = ""

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        mine = [f for f in facts if f.kind is FactKind.LAUNCHERS_CONFLICT]
        self.scheduler = self.scheduler or next((f.detail for f in mine), "")
        self.note(event, [f.value for f in mine])

    def words(self) -> tuple[str, str]:
        text = _("The training library refused to start: the process has a launcher's variables "
                 "({variables}) beside the scheduler's ({scheduler}), and either could assign "
                 "its rank. torchrun started inside an srun step sets both, and so does a "
                 "cluster's container hook that exports RANK, LOCAL_RANK and WORLD_SIZE into "
                 "every task (NVIDIA's enroot/pyxis).", variables=self.listed,
                 scheduler=self.scheduler)
        fix = _("Let one of them start the processes: srun alone (one task per GPU: "
                "--ntasks-per-node=<G>, no torchrun inside), or torchrun alone; where a container "
                "hook sets RANK, LOCAL_RANK and WORLD_SIZE, unset them at the top of the job "
                "script before srun starts the tasks")
        return text, fix
