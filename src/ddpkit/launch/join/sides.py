"""Token mode: the job, the nodes' ranks, liveness and stop orders, in torch's own c10d TCPStore.

The master hosts a ``torch.distributed.TCPStore`` (no home-made server) on the chosen interface's
address only and puts the job there; a worker that runs ``ddpkit join TOKEN`` connects to it, opens
the sealed job, claims the first free node rank, waits for the go, and runs its share. Every value
is sealed JSON (:mod:`ddpkit.launch.join.tokens`): encrypted, authenticated, bound to its key and run.
Keys, all under ``ddpkit/<run-id>/``:

=============  =====================================================================
``job``        the job (:class:`JoinJob`), written once by the master
``node/<R>``   the claim on rank R (host, address, interface, a random claim id), taken
               with the store's atomic ``compare_set``: a sealed claim, not a counter
``go``         every node has joined: start torchrun (names each rank's claim id, so a
               node whose claim was displaced before the master saw it stops)
``pulse``      a random nonce the master replaces every :data:`PULSE_S` seconds
``alive/<R>``  a heartbeat each worker writes every second: its claim id, a counter that must
               rise, and the latest pulse it read (:meth:`MasterSide.poll` counts a value only
               then: a replayed, repeated or held-back value is silence)
``done/<R>``   how node R ended (a :class:`~ddpkit.launch.outcomes.NodeOutcome`)
``stop``       why every node must stop now (a failure somewhere, or Ctrl-C on the master)
=============  =====================================================================
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ddpkit.errors import ConfigError, DdpkitError, DeadlineExceeded
from ddpkit.i18n import _
from ddpkit.launch.job import JobSpec
from ddpkit.launch.join.store import JobStore
from ddpkit.launch.outcomes import LOST, NodeOutcome
from ddpkit.launch.store_value import text_field
from ddpkit.wording import clauses

JOB, GO, STOP, PULSE = "job", "go", "stop", "pulse"
POLL_S = 0.5
HEARTBEAT_S = 1.0
HEARTBEAT_LOST_S = 10.0  # a worker without a fresh heartbeat this long is lost
PULSE_S = 2.0  # the master issues a new pulse this often; a beat must carry one issued within
#                HEARTBEAT_LOST_S, so a beat held back and replayed later buys at most that long
COMMANDS = ("launch", "test", "bench", "doctor")


@dataclass(frozen=True)
class JoinJob:
    """What the master puts in the store for joining nodes: the job (a
    :class:`~ddpkit.launch.job.JobSpec`, the same value the printed peer commands and the ssh
    fan-out use), the master's address, the passed environment, and what a node checks first."""

    job: JobSpec
    master_addr: str
    env: Mapping[str, str] = field(default_factory=dict)  # allow-listed env + .ddpkit_env
    join_timeout: float = 600.0
    ddpkit_version: str = ""
    cwd: str = ""
    progress_key: str = field(default="", repr=False)  # seals the hang watch's progress counters

    @property
    def nnodes(self) -> int:
        return self.job.nnodes

    @property
    def command(self) -> str:
        return self.job.command

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job.to_dict(), "master_addr": self.master_addr,
                "env": dict(sorted(self.env.items())), "join_timeout": self.join_timeout,
                "ddpkit_version": self.ddpkit_version, "cwd": self.cwd,
                "progress_key": self.progress_key}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JoinJob:
        try:
            found = cls(
                job=JobSpec.from_dict(data["job"]), master_addr=str(data["master_addr"]),
                env={str(k): str(v) for k, v in dict(data.get("env", {})).items()},
                join_timeout=float(data.get("join_timeout", 600.0)),
                ddpkit_version=str(data.get("ddpkit_version", "")), cwd=str(data.get("cwd", "")),
                progress_key=str(data.get("progress_key", "")))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError("bad-job", _("the master's job description is incomplete ({error})",
                                           error=str(exc)),
                              _("run the same ddpkit version on the master and this node")
                              ) from None
        if found.command not in COMMANDS or found.nnodes < 2:
            raise ConfigError("bad-job", _("the master's job ({command}, {nnodes} nodes) is not "
                                           "one ddpkit join can run", command=found.command,
                                           nnodes=found.nnodes),
                              _("run the same ddpkit version on the master and this node"))
        return found


@dataclass(frozen=True)
class JoinedNode:
    node_rank: int
    host: str
    address: str
    ifname: str
    claim: str = ""

    def describe(self) -> str:
        return _("node {node} joined from {address} ({host}, via {ifname})", node=self.node_rank,
                 address=self.address, host=self.host, ifname=self.ifname)


def node_key(rank: int) -> str:
    return f"node/{rank}"


def alive_key(rank: int) -> str:
    return f"alive/{rank}"


def done_key(rank: int) -> str:
    return f"done/{rank}"


class MasterSide:
    """The master's view: who joined, who is alive, who finished how."""

    def __init__(self, store: JobStore, spec: JoinJob,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.spec = spec
        self.clock = clock
        self.joined: dict[int, JoinedNode] = {}
        self.done: dict[int, NodeOutcome] = {}
        self.lost: dict[int, NodeOutcome] = {}
        self._beats: dict[int, tuple[int, float]] = {}  # rank: (highest counter, when)
        self.stale_beats: dict[int, int] = {}  # rank: beats ignored (replayed, repeated, old)
        self._pulses: dict[str, float] = {}  # nonce: when issued
        self._last_poll = -1e9
        self._stop_reason: str | None = None

    def publish(self) -> None:
        self.store.put(JOB, self.spec.to_dict())
        self._pulse(force=True)

    def _pulse(self, force: bool = False) -> None:
        """Issue a new pulse when the last is PULSE_S old; forget those too old to count."""
        now = self.clock()
        newest = max(self._pulses.values(), default=-1e9)
        if force or now - newest >= PULSE_S:
            nonce = secrets.token_hex(12)
            self.store.put(PULSE, {"nonce": nonce})
            self._pulses[nonce] = now
        for nonce, issued in list(self._pulses.items()):
            if now - issued > HEARTBEAT_LOST_S:
                del self._pulses[nonce]

    def _beat(self, rank: int, record: dict[str, Any] | None, now: float) -> bool:
        """Whether ``record`` is a fresh heartbeat of rank's current claim: its counter rises
        above every one seen and it echoes a pulse issued within HEARTBEAT_LOST_S. A replayed,
        repeated or held-back value (sealed values can be copied, not made) is silence."""
        if record is None:
            return False
        highest, _since = self._beats.get(rank, (0, now))
        count = record.get("n")
        if not isinstance(count, int) or isinstance(count, bool):
            count = -1
        fresh = (count > highest and text_field(record, "claim") == self.joined[rank].claim
                 and text_field(record, "pulse") in self._pulses)
        if fresh:
            self._beats[rank] = (count, now)
        elif count != highest:  # what the worker last wrote, read again, is no replay
            self.stale_beats[rank] = self.stale_beats.get(rank, 0) + 1
        return fresh

    def workers(self) -> range:
        return range(1, self.spec.nnodes)

    def wait_for_nodes(self, on_join: Callable[[JoinedNode], None], timeout: float,
                       on_wait: Callable[[float, list[int]], None] | None = None) -> None:
        """Until every worker rank holds a real claim; ``on_wait(seconds waited, missing ranks)``
        each round. Slots are re-read every round (a claim displaced by junk is re-asserted by
        its worker, one displaced by another worker moves), and the job is put back when someone
        spoiled it."""
        start = self.clock()
        deadline = start + timeout
        while True:
            self._read_claims(on_join)
            if len(self.joined) == self.spec.nnodes - 1:
                break
            if self.store.read(JOB) is None:  # emptied or overwritten: workers need it
                self.publish()
            self._pulse()
            self.sweep()
            if on_wait is not None:
                on_wait(self.clock() - start, [r for r in self.workers() if r not in self.joined])
            if self.clock() > deadline:
                missing = [r for r in self.workers() if r not in self.joined]
                came = clauses([n.describe() for n in sorted(self.joined.values(),
                                                             key=lambda n: n.node_rank)])
                raise DeadlineExceeded(
                    "nodes-missing",
                    _("{count} of {workers} worker nodes never joined within {seconds:g} s "
                      "(missing node rank(s) {missing}; joined: {joined})", count=len(missing),
                      workers=self.spec.nnodes - 1, seconds=timeout,
                      missing=", ".join(map(str, missing)), joined=came or _("none")),
                    _("run the printed `ddpkit join ddpk://...` line on every other machine, "
                      "check they reach {endpoint} (`ddpkit nics --to {address}`), or raise "
                      "--join-timeout", endpoint=self.store.token.endpoint,
                      address=self.store.token.address),
                    details={"missing": missing},
                )
            time.sleep(0.2)

    def _read_claims(self, on_join: Callable[[JoinedNode], None]) -> None:
        """Every rank's current claim; a claim id seen under two ranks counts under the latest."""
        for rank in self.workers():
            record = self.store.read(node_key(rank))
            if record is None or not text_field(record, "claim"):
                continue  # empty, or junk (emptied by read): a joined node keeps its place
            node = JoinedNode(rank, text_field(record, "host", "?"),
                              text_field(record, "address", "?"), text_field(record, "ifname", "?"),
                              text_field(record, "claim"))
            known = self.joined.get(rank)
            if known is not None and known.claim == node.claim:
                continue
            for other, held in list(self.joined.items()):
                if held.claim == node.claim:
                    del self.joined[other]  # the same node, moved to this rank
            self.joined[rank] = node
            self._beats[rank] = (0, self.clock())  # a new claim: a new worker, counting from 1
            on_join(node)

    def release(self) -> None:
        now = self.clock()
        self._beats = {rank: (highest, now) for rank, (highest, _) in self._beats.items()}
        self.store.put(GO, {"nodes": self.spec.nnodes,
                            "claims": {str(r): n.claim for r, n in self.joined.items()}})

    def stop(self, reason: str) -> None:
        if self._stop_reason is None:
            self._stop_reason = reason
            try:
                if self.store.read(STOP) is None:
                    self.store.put(STOP, {"reason": reason, "by": 0})
            except DdpkitError:
                self.store.put(STOP, {"reason": reason, "by": 0})

    def poll(self) -> None:
        """Read every worker's heartbeat and final status (rate-limited to every POLL_S)."""
        now = self.clock()
        if now - self._last_poll < POLL_S:
            return
        self._last_poll = now
        self.sweep()
        with contextlib.suppress(DdpkitError):  # a lost store shows in the reads below
            self._pulse()
        for rank in self.joined:
            if rank in self.done or rank in self.lost:
                continue
            record = self.store.read(done_key(rank))
            if record is not None:
                try:
                    self.done[rank] = NodeOutcome.from_dict({**record, "node_rank": rank},
                                                            observed_at=now)
                    continue
                except (TypeError, ValueError, KeyError, AttributeError):
                    self.store.rejected[done_key(rank)] = 1 + self.store.rejected.get(
                        done_key(rank), 0)
            if self._beat(rank, self.store.read(alive_key(rank)), now):
                continue
            if now - self._beats.get(rank, (0, now))[1] > HEARTBEAT_LOST_S:
                node = self.joined[rank]
                message = _("node {node} ({host}, {address}) stopped responding: no "
                            "heartbeat for {seconds:g} s", node=rank, host=node.host,
                            address=node.address, seconds=HEARTBEAT_LOST_S)
                if self.stale_beats.get(rank):
                    message = _("{message} ({count} stale or replayed heartbeat value(s) "
                                "ignored: someone else writes to the job store)",
                                message=message, count=self.stale_beats[rank])
                self.lost[rank] = NodeOutcome(node_rank=rank, host=node.host, state=LOST,
                                              error_id="node-lost", message=message,
                                              observed_at=now)

    def names(self) -> set[str]:
        """Every key this job ever writes."""
        per_node = {f(r) for r in self.workers() for f in (node_key, alive_key, done_key)}
        return {JOB, GO, STOP, PULSE, *per_node}

    def sweep(self) -> None:
        """Delete whatever keys someone else put in the store (it lives in this process's memory),
        however few. Best effort: a sweep that fails is tried again at the next poll."""
        with contextlib.suppress(DdpkitError):
            self.store.sweep(self.names())

    def store_report(self) -> dict[str, Any]:
        """What the store held that this job did not write: values that did not open (per key),
        and keys someone else put there (deleted, and those a bounded sweep has not reached
        yet)."""
        self.sweep()
        return {"rejected": dict(self.store.rejected), "removed_keys": self.store.removed,
                "foreign_keys_left": self.store.foreign_left}

    def should_stop(self) -> str | None:
        """The hook for the master's own node: a reason once any worker failed or was lost."""
        self.poll()
        for outcome in sorted([*self.done.values(), *self.lost.values()], key=lambda o: o.observed_at):
            if outcome.failed:
                reason = outcome.ended()
                self.stop(reason)
                return reason
        return None

    def collect(self, wait: float) -> tuple[NodeOutcome, ...]:
        """Every worker's outcome, waiting up to ``wait`` seconds for the last ones."""
        deadline = self.clock() + wait
        while True:
            self._last_poll = -1e9
            self.poll()
            pending = [r for r in self.joined if r not in self.done and r not in self.lost]
            if not pending or self.clock() > deadline:
                break
            time.sleep(0.2)
        outcomes = []
        for rank in self.workers():
            if rank in self.done:
                outcomes.append(self.done[rank])
            elif rank in self.lost:
                outcomes.append(self.lost[rank])
            else:
                node = self.joined.get(rank)
                host = node.host if node else "?"
                message = (_("node {node} ({host}) did not report how it ended within "
                             "{seconds:g} s", node=rank, host=host, seconds=wait)
                           if node else _("node {node} never joined", node=rank))
                outcomes.append(NodeOutcome(node_rank=rank, host=host, state=LOST,
                                            error_id="node-lost", message=message,
                                            observed_at=self.clock()))
        return tuple(outcomes)
