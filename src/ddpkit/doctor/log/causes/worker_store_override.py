"""torchrun's workers dialling a store on their own machine's loopback, which no one serves: the
script set MASTER_ADDR and MASTER_PORT itself.

torchrun starts its workers only once its agents completed the rendezvous, and hands each the
store it is to join in MASTER_ADDR and MASTER_PORT (torch/distributed/elastic/agent/server/
api.py, ``_set_master_addr_port`` and the workers' environment; from torch 2.0 the agents' own
store, TORCHELASTIC_USE_AGENT_STORE, which every agent just reached). Its tee marks each
worker's line with "[<role><local rank>]:", and its --log-dir keeps each worker's own files. A
worker whose c10d store client then dials a loopback address and fails was given another
address than torchrun's: the script wrote its own into os.environ before
``init_process_group`` (the PyTorch DDP tutorial's ``setup()``: MASTER_ADDR "localhost",
MASTER_PORT "12355", kept when the script moved from mp.spawn to torchrun). A real run on the
simulated machines (``--master-addr 10.0.0.2 --master-port 29411``, the script's setup() setting
localhost:12355) timed out on both nodes at (localhost, 12355), node 0's workers too.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import AddressClass, Fact
from ddpkit.doctor.log.facts.winsock import error_class
from ddpkit.doctor.log.prefixes import TORCHRUN_TEE
from ddpkit.doctor.log.run_dir import attempt_of
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

# a dial no one answered (refused, or retried so until c10d's timeout); not another failure of
# the client's own (a local address it cannot take, errno 99)
_NO_ONE_SERVED = frozenset({"refused", "timeout"})


class WorkerStoreOverride(Cause):
    kinds = frozenset({"connect-error"})
    specificity = 35
    supersedes = GENERIC | {"peer-unreachable", "rendezvous-timeout", "wrong-interface"}
    yields_to = frozenset({"port-in-use"})  # (a store that could not listen: no one served it)

    def __init__(self) -> None:
        self.target = ""  # the first loopback store a worker dialled, host:port
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        # (a worker's own file in torchrun's --log-dir has an attempt: run_dir.attempt_of)
        worker = TORCHRUN_TEE.match(event.text) or attempt_of(event.file) is not None
        if (event.get("source") != "c10d" or not worker
                or error_class(event.get("err")) not in _NO_ONE_SERVED
                or not any(f.address_class is AddressClass.LOOPBACK for f in facts)):
            return
        self.target = self.target or f"{event.get('addr')}:{event.get('port')}"
        self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if not self.target:
            return None
        text = _("torchrun's workers dialled the store at {target}, on their own machine's "
                 "loopback, and no one served it. torchrun starts its workers only after its "
                 "agents met at its --master-addr and --master-port, and gives every worker that "
                 "store in MASTER_ADDR and MASTER_PORT; a worker dialling {target} was given "
                 "another: the script sets MASTER_ADDR and MASTER_PORT itself (the PyTorch DDP "
                 "tutorial's setup() sets 'localhost' and '12355'), or its environment does.",
                 target=self.target)
        fix = _("Under torchrun (or ddpkit launch), remove the lines that set MASTER_ADDR, "
                "MASTER_PORT, RANK and WORLD_SIZE in the script and call "
                "init_process_group(backend) without them: torchrun sets all four for every "
                "worker. Keep a setup() that sets them for mp.spawn only (if 'RANK' not in "
                "os.environ).")
        return made("rendezvous-config", "error", text, fix, merge(self.bag.items))
