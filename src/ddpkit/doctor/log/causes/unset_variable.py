"""An env:// rendezvous without its variables: the script was not started by a launcher.

torch's ``torch/distributed/rendezvous.py`` (v1.9 to v2.x), ``_env_rendezvous_handler``, raises
``_env_error(var)``: ``ValueError: Error initializing torch.distributed using env:// rendezvous:
environment variable MASTER_ADDR expected, but not set`` (also RANK, WORLD_SIZE, MASTER_PORT);
a traceback may show only the raise line, ``raise _env_error("MASTER_ADDR")``. torchelastic's
``get_env_variable_or_raise`` prints ``Environment variable X expected, but not set``. torchrun
(or ``python -m torch.distributed.launch``) sets them; ``python train.py`` does not. A script that
reads them itself fails with os.environ's ``KeyError: 'RANK'``; when all it missed is
``LOCAL_RANK``, the variable through which a launcher hands each process its local rank, the
finding is the local rank's (``local-rank-argument``).
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, NotingValues, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import FactKind
from ddpkit.i18n import _

LOCAL_RANK = "LOCAL_RANK"


class UnsetVariable(NotingValues):
    needs = frozenset({FactKind.UNSET_VARIABLE})
    specificity = 20
    finding_id = "rendezvous-config"
    supersedes = GENERIC

    def words(self) -> tuple[str, str]:
        text = _("The env:// rendezvous needs {variables} in the environment and found it unset: "
                 "the script was started without a launcher that sets MASTER_ADDR, MASTER_PORT, "
                 "RANK and WORLD_SIZE.", variables=self.listed)
        fix = _("Start the script with a launcher, which sets them for every rank:\n"
                "  ddpkit launch --nproc-per-node <G> train.py   (or torchrun)\n"
                "or set all four yourself before init_process_group")
        return text, fix

    def finding(self, context: Context) -> Finding | None:
        if set(self.values) != {LOCAL_RANK}:
            return super().finding(context)
        text = _("The script reads its local rank from LOCAL_RANK, which a launcher sets for "
                 "each process it starts (torchrun, torch.distributed.launch, DeepSpeed's and "
                 "accelerate's launchers), and found it unset: the script was started without "
                 "one.")
        fix = _("Start the script with a launcher:\n"
                "  ddpkit launch --nproc-per-node <G> train.py   (or torchrun)\n"
                "or, for one process, set LOCAL_RANK=0 (and RANK, WORLD_SIZE, MASTER_ADDR, "
                "MASTER_PORT) yourself")
        return made("local-rank-argument", "error", text, fix, merge(self.bag.items))
