"""The master address of a job over several machines is one the other machines cannot reach.

Every node of a job dials the master at the address its launcher was given (DeepSpeed's runner
prints it, "--master_addr=X"; torchrun's launch configs "master_addr : X"; a script's
"MASTER_ADDR=X"). An address of loopback (127.0.0.0/8, localhost) is each machine's own; one on
Docker's default bridge (172.17.0.0/16) is each container's side of its own machine's NAT, often
the same on every rented instance, as `ifconfig` shows it on eth0; one that is link-local
(169.254.0.0/16) is the link's alone. Given as the master of a job over several machines (the
facts' NNODES, or two hosts), the other nodes dial themselves, or nothing: c10d retries quietly
until its timeout, so the logs show the job waiting and then stopped, or timing out. A real run
on two simulated machines (DeepSpeed's launcher, --no_ssh, both nodes given 172.17.0.4, each
node's eth0, both stopped after 60 s) printed nothing but the wait and the stop, which read as
each node waiting for the other.
"""

from __future__ import annotations

from ddpkit.doctor.addresses import UNREACHABLE_KINDS, AddressClass
from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class MasterAddress(Cause):
    needs = frozenset({FactKind.MASTER_ADDRESS})
    specificity = 15
    supersedes = GENERIC | {"peer-unreachable", "rendezvous-timeout", "firewall",
                            "container-network"}

    def __init__(self) -> None:
        self.address = ""
        self.kind: AddressClass | None = None
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            # (the address kinds no other machine reaches: doctor.addresses' own list)
            if fact.kind is FactKind.MASTER_ADDRESS and fact.detail in UNREACHABLE_KINDS:
                if not self.address:
                    self.address, self.kind = fact.value, AddressClass(fact.detail)
                self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if not self.bag or not context.multi_node or not context.failed:
            return None
        if self.kind is AddressClass.LOOPBACK:
            where = _("loopback, each machine's own address for itself")
        elif self.kind is AddressClass.CONTAINER_BRIDGE:
            where = _("on Docker's default bridge (172.17.0.0/16), a container's side of its own "
                      "machine's NAT, often the same on every rented instance (what ifconfig "
                      "shows on eth0)")
        else:
            where = _("link-local, an address of one link alone")
        text = _("The master address the nodes were given, {address}, is {where}: in a job over "
                 "several machines the other nodes dial it and reach themselves or nothing. "
                 "c10d retries such a dial quietly until its timeout, so each node waits for the "
                 "others until it is stopped or times out.", address=self.address, where=where)
        fix = _("Give every node the master's address on the network between the machines "
                "(ddpkit nics shows it, eth1 on most rented instances): --master_addr / "
                "--master-addr <that address>, the same on every node. ddpkit launch finds it "
                "for you.")
        return made("wrong-interface", "error", text, fix, merge(self.bag.items))
