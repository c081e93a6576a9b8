"""An env:// rendezvous without its variables: the script was not started by a launcher.

torch's ``torch/distributed/rendezvous.py`` (v1.9 to v2.x), ``_env_rendezvous_handler``, raises
``_env_error(var)``: ``ValueError: Error initializing torch.distributed using env:// rendezvous:
environment variable MASTER_ADDR expected, but not set`` (also RANK, WORLD_SIZE, MASTER_PORT);
a traceback may show only the raise line, ``raise _env_error("MASTER_ADDR")``. torchelastic's
``get_env_variable_or_raise`` prints ``Environment variable X expected, but not set``. torchrun
(or ``python -m torch.distributed.launch``) sets them; ``python train.py`` does not.
"""

from __future__ import annotations

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import GENERIC, Context, Noting, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class UnsetVariable(Noting):
    needs = frozenset({FactKind.UNSET_VARIABLE})
    specificity = 20
    supersedes = GENERIC

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        self.note(event, [f.value for f in facts if f.kind is FactKind.UNSET_VARIABLE])

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text = _("The env:// rendezvous needs {variables} in the environment and found it unset: "
                 "the script was started without a launcher that sets MASTER_ADDR, MASTER_PORT, "
                 "RANK and WORLD_SIZE.", variables=self.listed)
        fix = _("Start the script with a launcher, which sets them for every rank:\n"
                "  ddpkit launch --nproc-per-node <G> train.py   (or torchrun)\n"
                "or set all four yourself before init_process_group")
        return made("rendezvous-config", "error", text, fix, merge(self.bag.items))
