"""A restarted attempt that dialled the attempt before it: torchrun's shared store.

torchrun restarts a failed worker group up to ``--max-restarts`` times (torch's elastic agent,
api.py). Its agent shares its store with the workers' init_process_group: the static rendezvous
(``--master-addr``/``--master-port``, static_tcp_rendezvous.py) creates one TCPStore and hands
it to every attempt, and the c10d rendezvous does the same unless
``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` (dynamic_rendezvous.py; pytorch/pytorch#135712). The
first attempt's keys are still there, so a restarted rank can read the address a process of the
attempt before published, and dial it after that process exited: on one machine, a loopback
address that refuses. A real torchrun 2.13 run shows it (tests/fixtures/logs/torchrun-cpu/
restart): the restarted attempt failed in init_process_group, and with the variable set it got
as far as the first attempt's own error again.

A restart shows as the agent reporting a failed attempt twice: it logs the first failure of
each attempt once (multiprocessing/api.py: "failed (exitcode: %d) local_rank: %d (pid: %d)"), so
two such lines of one log with two worker pids are two attempts; or as a rank log of an attempt
after the first (torchrun's --log-dir, ``attempt_<N>``). The refusal after it is not the network's
fault (the rules would call loopback the wrong interface); it is a warning beside the first
attempt's failure, which the logs show before it and which is the cause.
"""

from __future__ import annotations

from ddpkit.doctor.addresses import AddressClass, address_class
from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import FEW, Cause, Context
from ddpkit.doctor.log.evidence import Bag
from ddpkit.doctor.log.facts.kinds import Fact
from ddpkit.doctor.log.kinds import EventKind
from ddpkit.doctor.log.run_dir import attempt_of
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class RestartedWorkers(Cause):
    kinds = frozenset({EventKind.AGENT_FAILED, EventKind.CONNECT_ERROR})
    specificity = 0
    # (the readings of the refusal itself; the failures before it keep their own findings)
    supersedes = frozenset({"wrong-interface", "peer-unreachable"})

    def __init__(self) -> None:
        self.pids: dict[str, dict[str, None]] = {}  # file -> the worker pids the agent reported
        self.first_failure: dict[str, int] = {}  # file -> the line of the agent's first report
        self.addresses: dict[str, None] = {}
        self.refused = Bag(FEW)

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        if event.kind == EventKind.AGENT_FAILED:
            self.first_failure.setdefault(event.file, event.line)
            pids = self.pids.setdefault(event.file, {})
            if event.get("pid") and len(pids) < FEW:
                pids.setdefault(event.get("pid"))
            return
        if "refused" not in event.get("err").lower() or len(self.addresses) >= FEW:
            return
        if address_class(event.get("addr")) is not AddressClass.LOOPBACK:
            return
        after = (attempt_of(event.file) or 0) > 0 or (
            event.file in self.first_failure and event.line > self.first_failure[event.file])
        if after:
            self.addresses.setdefault(f"{event.get('addr')}:{event.get('port')}"
                                      if event.get("port") else event.get("addr"))
            self.refused.add(event)

    def finding(self, context: Context) -> Finding | None:
        twice = next((list(pids) for pids in self.pids.values() if len(pids) > 1), None)
        logged = any((attempt_of(item.file) or 0) > 0 for item in self.refused.items)
        if context.multi_node or not self.refused or not (twice or logged):
            return None
        how = (_("torchrun's agent reported a failed attempt twice, pid {first}, then pid "
                 "{then}", first=twice[0], then=twice[1]) if twice is not None
               else _("its --log-dir holds a rank log of a later attempt"))
        text = _("torchrun restarted the workers after they failed ({how}), and the restarted "
                 "attempt dialled {addresses} on this machine and was refused: most likely an "
                 "address a process of the attempt before had published, still in the store "
                 "torchrun's agent shares with its workers, and that process had exited "
                 "(pytorch/pytorch#135712). The restart could not get past init_process_group; "
                 "the first attempt's failure, above, is the cause.", how=how,
                 addresses=", ".join(self.addresses))
        fix = _("Fix the first attempt's failure. For restarts that work: use the c10d "
                "rendezvous (--rdzv-backend c10d --rdzv-endpoint <master>:<port>, or "
                "--standalone on one machine) with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, which "
                "gives each attempt a store of its own; the static rendezvous (--master-addr "
                "and --master-port alone) keeps one store for every attempt.")
        # (its own words alone: the catalogue's general ones are of a rendezvous that never
        # started, and this one completed; init_process_group after it failed)
        e = entry("rendezvous-config")
        return Finding(e.id, "warning", e.title, text, fix, tuple(self.refused.items))
