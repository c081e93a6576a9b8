"""A rank that waited in the store for rank 0's ncclUniqueId until the store's timeout: the ranks
reached a communicator's creation out of step, collective-timeout.

ProcessGroupNCCL makes each NCCL communicator when a group first runs a collective or a
send/recv on a device (from torch 2.2, at init_process_group only where it is given device_id):
the communicator's rank 0 creates the ncclUniqueId and sets it in the c10d store under a key that
names the group and the device ("/default_pg/0//27//cuda//0"), and every other rank gets it
(broadcastUniqueNCCLID). A get that fails is raised as "[<rank>] is setting up NCCL communicator
and retrieving ncclUniqueId from [0] via c10d key-value store by key '<key>', but
store->get('<key>') got error: <the store's error>". TCPStore's get waits for the key; its error
on the timeout is "wait timeout after <ms>ms, keys: <keys>" (TCPStore.cpp; older releases
"Socket Timeout"): the store answered the whole time, and the key was never set. Rank 0 never
made this communicator: it did not run the matching collective (another order, a branch taken on
one rank, a send without its recv), ran it on another device (a rank whose current device was
never set makes its key for cuda:0), or was still busy elsewhere. That is a collective some rank
never issued, or issued as another: collective-timeout. A store error that is a connection's
("Connection reset by peer", "Broken pipe") is the store's host gone: the catalogue's own reading
of the line stays.
"""

from __future__ import annotations

import re

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_TIMED_OUT = re.compile(r"\b(?:wait )?time(?:d )?out\b|\bTimeout\b", re.IGNORECASE)


class UniqueIdWait(Cause):
    needs = frozenset({FactKind.UNIQUE_ID_WAIT})
    specificity = 15
    supersedes = GENERIC | {"peer-unreachable"}

    def __init__(self) -> None:
        self.key: str | None = None
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            if fact.kind is FactKind.UNIQUE_ID_WAIT and _TIMED_OUT.search(fact.value):
                if self.key is None:
                    self.key = fact.detail
                self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if self.key is None:
            return None
        text = _("A rank waited in the store for rank 0 of a new NCCL communicator to publish "
                 "its ncclUniqueId (key '{key}') until the store timed out: the store answered, "
                 "and rank 0 never made that communicator. The ranks reached their collectives "
                 "out of step: rank 0 did not run the matching collective or send/recv, ran it on "
                 "another device, or was still busy elsewhere.", key=self.key)
        fix = _("Bind each rank to its GPU before any collective: torch.cuda.set_device("
                "local_rank), and init_process_group(..., device_id=torch.device(\"cuda\", "
                "local_rank)); make every rank run the same collectives and matching send/recv "
                "pairs in the same order (TORCH_DISTRIBUTED_DEBUG=DETAIL names a mismatch).")
        return made("collective-timeout", "error", text, fix, merge(self.bag.items))
