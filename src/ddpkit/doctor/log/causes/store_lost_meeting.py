"""torchrun's agent losing the rendezvous store while it still met the other nodes' agents:
stopped-while-waiting, the cause on the store's node.

Every torchrun agent meets the others through one c10d store, which node 0's torchrun hosts (the
static rendezvous at --master-addr and --master-port; the c10d rendezvous at the host of
--rdzv-endpoint). Before any worker starts, each agent runs its rendezvous and then sets its
workers' info in that store and waits for every node's (torch's elastic agent, api.py
``_rendezvous`` and ``_assign_worker_ranks``; the rendezvous package's handlers: the facts'
``AGENT_MEETING``). A traceback of the agent raised inside those steps whose exception is a
connection the peer closed or reset (c10d's ``Failed to recv, got 0 bytes. Connection was likely
closed. Did the remote server shutdown or crash?``, a ``DistNetworkError``, ``Connection reset by
peer``, ``Broken pipe``) is that store gone while this node waited: node 0's torchrun stopped
(killed, timed out, its own failure) before every node had joined, not a rank that failed mid-job
(no worker had started). A real run on two simulated machines (accelerate launch, both nodes
given machine rank 0, node 0 stopped after 60 s) printed it on node 1, whose log had read
connection-lost and rank-failed.
"""

from __future__ import annotations

import re

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made, others_first
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

# a connection the other end closed or reset (c10d's socket and TCPStore, torch 1.9 to 2.13)
_LOST = re.compile(r"Connection was likely closed|Connection reset by peer|Broken pipe"
                   r"|Failed to recv, got 0 bytes")
_REACH = 80  # lines from the agent's meeting frame to the exception (deeper frames between)
_PROCESSES = 256  # tracebacks followed at once


class StoreLostMeeting(Cause):
    needs = frozenset({FactKind.AGENT_MEETING, FactKind.EXCEPTION})
    specificity = 10
    supersedes = GENERIC | {"connection-lost"}
    yields_to = others_first("stopped-while-waiting") - {"connection-lost"}

    def __init__(self) -> None:
        self.meeting: dict[tuple[str, str, int | None], tuple[int, str]] = {}  # line, step
        self.step = ""
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        where = (event.file, event.origin, event.rank)
        for fact in facts:
            if fact.kind is FactKind.AGENT_MEETING:  # (its outermost line, innermost step)
                if where in self.meeting:
                    self.meeting[where] = (self.meeting[where][0], fact.value)
                elif len(self.meeting) < _PROCESSES:
                    self.meeting[where] = (event.line, fact.value)
            elif fact.kind is FactKind.EXCEPTION:
                met = self.meeting.pop(where, None)
                if (met is not None and 0 < event.line - met[0] <= _REACH
                        and (fact.value.endswith("DistNetworkError")
                             or _LOST.search(fact.detail) is not None)):
                    self.step = self.step or met[1]
                    self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text = _("torchrun's agent lost its connection to the rendezvous store while it was still "
                 "meeting the other nodes' agents (in torch's {step}): no worker had started on this "
                 "node. That store lives in node 0's torchrun (at --master-addr, or the host of "
                 "--rdzv-endpoint), so node 0's launcher stopped while this node waited for the "
                 "nodes to meet: it was stopped (Ctrl-C, a time limit, the scheduler) or failed, "
                 "perhaps because the nodes were not all given matching settings (two nodes with "
                 "the same --node-rank wait for a node that never comes). The cause is on node 0.",
                 step=self.step)
        fix = _("Read node 0's log from the same run beside this one (ddpkit doctor --log "
                "node0.log node1.log ...). Give every node the same --nnodes, --master-addr and "
                "--master-port and its own --node-rank, and keep node 0 running until every node "
                "has joined; ddpkit launch checks the node ranks for you.")
        return made("stopped-while-waiting", "error", text, fix, merge(self.bag.items))
