"""Token mode on a joining node (:class:`WorkerSide`): fetch the job, claim a rank and keep the
claim, wait for the go, beat, and hear the stop order, with every store call under a deadline.

The keys are :mod:`ddpkit.launch.join.sides`'. Two guarantees against the network:

- **A rewrite cannot lock a node out.** A claim is sealed and carries a random claim id; until the
  go, the worker re-reads its slot and re-asserts the same claim when someone emptied it or wrote
  junk there (idempotent), or moves to a free slot when another real worker took it; the rank a
  node runs as is the one the go names for its claim id.
- **A node that loses the master stops.** The heartbeat thread reads the master's ``pulse``,
  writes ``alive/<R>`` (its claim id, a rising counter, that pulse: nothing an eavesdropper can
  replay later, see :meth:`~ddpkit.launch.join.sides.MasterSide.poll`) and then reads
  ``stop`` (a round trip: a write alone "succeeds" into the kernel's send buffer on a dead link),
  each under :data:`~ddpkit.launch.join.store.CALL_TIMEOUT_S`; no answer for
  :data:`LOST_AFTER_S` is the master lost, and :meth:`WorkerSide.should_stop` says so without
  touching the network itself.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable

from ddpkit.errors import DdpkitError, DeadlineExceeded, JobFailed
from ddpkit.i18n import _
from ddpkit.launch.join.sides import (
    GO,
    HEARTBEAT_S,
    JOB,
    POLL_S,
    PULSE,
    STOP,
    JoinJob,
    alive_key,
    done_key,
    node_key,
)
from ddpkit.launch.join.store import JobStore
from ddpkit.launch.join.tokens import Unopened
from ddpkit.launch.outcomes import OK, STOPPED, NodeOutcome
from ddpkit.launch.store_value import NotOurs, text_field

LOST_AFTER_S = 12.0  # without one answered round trip to the master: it is gone (or cut off)
SPOILED_RETRY_S = 5.0  # a job value that does not open is read again this long (the master
#                        puts back a spoiled job) before the token is blamed


class WorkerSide:
    """A joining node's view: fetch the job, take a rank, beat, wait, watch for the stop order."""

    def __init__(self, store: JobStore, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.clock = clock
        self.rank: int | None = None
        self.claim = ""
        self.nnodes = 0
        self._body: dict[str, str] = {}
        self._last_poll = -1e9
        self._beating = threading.Event()
        self._answered = clock()  # the last round trip to the master that came back
        self._reason: str | None = None  # a stop order, or the master lost, seen by the heartbeat

    def fetch_job(self) -> JoinJob:
        """The job; JobFailed ``token-rejected`` (a value sealed with another secret: an old or
        mistyped token, or a forgery that outlives the master's repair) or ``job-store-tampered``
        (junk under the job's key that the master did not replace within SPOILED_RETRY_S)."""
        deadline = self.clock() + SPOILED_RETRY_S
        while True:
            try:
                record = self.store.read_strict(JOB)
                break
            except NotOurs as exc:
                if self.clock() > deadline:
                    raise _spoiled(self.store, exc) from None
                time.sleep(0.2)
        if record is None:
            raise JobFailed("job-not-found",
                            _("the job store at {endpoint} has no job for this token",
                              endpoint=self.store.token.endpoint),
                            _("copy the token the master printed for its current run"))
        return JoinJob.from_dict(record)

    def claim_rank(self, spec: JoinJob, host: str, address: str, ifname: str) -> int:
        """Take the first free node rank with a sealed claim (who, from where, a random id)."""
        self.claim = self.claim or secrets.token_hex(8)
        self.nnodes = spec.nnodes
        self._body = {"host": host, "address": address, "ifname": ifname, "claim": self.claim}
        for rank in range(1, spec.nnodes):
            if self.store.claim(node_key(rank), self._body, self.claim):
                self.rank = rank
                return rank
        raise JobFailed("job-full", _("the job already has its {nnodes} nodes", nnodes=spec.nnodes),
                        _("start a new job on the master with a larger --nnodes"))

    def keep_claim(self) -> None:
        """Before the go: the claim is still in its slot; put it back when junk or nothing is
        there, or take another free rank when another real worker holds this one."""
        assert self.rank is not None
        record = self.store.read(node_key(self.rank))
        if record is not None and text_field(record, "claim") == self.claim:
            return
        if not self.store.claim(node_key(self.rank), self._body, self.claim):
            for rank in range(1, self.nnodes):
                if rank != self.rank and self.store.claim(node_key(rank), self._body, self.claim):
                    self.rank = rank
                    return

    def start_heartbeat(self, on_lost: Callable[[str], None]) -> threading.Thread:
        """Every second on a connection of its own, until :meth:`stop_beating`: write
        ``alive/<rank>``, read the stop order; ``on_lost`` once the master stops answering."""
        assert self.rank is not None
        beats = self.store.clone()
        self._beating.set()
        self._answered = self.clock()

        def beat() -> None:
            count, pulse = 0, ""
            while self._beating.is_set():
                count += 1
                try:
                    issued = beats.read(PULSE)  # the round trip that proves the master is there
                    pulse = text_field(issued, "nonce", pulse) if issued else pulse
                    beats.put(alive_key(self.rank or 0),
                              {"n": count, "claim": self.claim, "pulse": pulse})
                    record = beats.read(STOP)
                except DdpkitError as exc:
                    self._lost(on_lost, exc.message)
                    return
                self._answered = self.clock()
                if record is not None and self._reason is None:
                    self._reason = text_field(record, "reason", "stopped", most=2000)
                time.sleep(HEARTBEAT_S)

        thread = threading.Thread(target=beat, name="ddpkit-heartbeat", daemon=True)
        thread.start()
        return thread

    def _lost(self, on_lost: Callable[[str], None], why: str) -> None:
        if self._beating.is_set() and self._reason is None:
            self._reason = why
            on_lost(why)

    def stop_beating(self) -> None:
        self._beating.clear()

    def wait_for_go(self, timeout: float) -> None:
        """Until the go; then this node's rank is the one the go names for its claim id.
        JobFailed ``job-stopped`` / ``rank-taken``, DeadlineExceeded ``join-timeout``,
        NetworkProblem ``join-store-lost``."""
        deadline = self.clock() + timeout
        while (go := self.store.read(GO)) is None:
            reason = self.stop_reason()
            if reason:
                raise JobFailed("job-stopped", _("the job was stopped before it started: {reason}",
                                                 reason=reason),
                                _("see the master's output"))
            if self.clock() > deadline:
                raise DeadlineExceeded("join-timeout", _("the master did not start the job within "
                                                         "{seconds:g} s of this node joining",
                                                         seconds=timeout),
                                       _("start `ddpkit join` on every other node too"))
            self.keep_claim()
            time.sleep(0.2)
        claims = go.get("claims")
        if isinstance(claims, dict):
            named = [int(r) for r, c in claims.items() if c == self.claim and str(r).isdigit()]
            if not named:
                raise JobFailed("rank-taken", _("the master started the job without this node: "
                                                "its claim was displaced and every rank was taken "
                                                "meanwhile"),
                                _("run `ddpkit join` again for a new job; if it happens again, "
                                  "someone else is writing to the job store (see the threat "
                                  "model in docs/multi-node.md)"))
            self.rank = named[0]

    def stop_reason(self) -> str | None:
        record = self.store.read(STOP)
        return text_field(record, "reason", "stopped", most=2000) if record else None

    def should_stop(self) -> str | None:
        """The hook for this node's torchrun: the stop order, or the master gone. With the
        heartbeat running this reads only what its thread saw (never blocks on the network)."""
        if self._beating.is_set() or self._reason is not None:
            if self._reason is None and self.clock() - self._answered > LOST_AFTER_S:
                self._reason = _("lost the master's job store at {endpoint}: no answer for "
                                 "{seconds:g} s", endpoint=self.store.token.endpoint,
                                 seconds=LOST_AFTER_S)
            return self._reason
        now = self.clock()
        if now - self._last_poll < POLL_S:
            return None
        self._last_poll = now
        try:
            return self.stop_reason()
        except DdpkitError as exc:
            return exc.message

    def report(self, outcome: NodeOutcome) -> None:
        """Put how this node ended; a failure also orders every other node to stop."""
        self.stop_beating()
        self.store.put(done_key(outcome.node_rank), outcome.to_dict())
        if outcome.state not in (OK, STOPPED) and self.stop_reason() is None:
            self.store.put(STOP, {"reason": outcome.ended(), "by": outcome.node_rank})


def _spoiled(store: JobStore, exc: NotOurs) -> JobFailed:
    """Why the job did not open, without the run id or the secret."""
    if isinstance(exc, Unopened):
        return JobFailed("token-rejected",
                         _("the job at {endpoint} does not open with this token's secret",
                           endpoint=store.token.endpoint),
                         _("copy the token again from the master's current run (an old or "
                           "mistyped token; or someone else writes to that port)"))
    return JobFailed("job-store-tampered",
                     _("the job store at {endpoint} holds something under the job's key that "
                       "ddpkit did not write ({why}), and the master did not repair it",
                       endpoint=store.token.endpoint, why=exc.why),
                     _("someone else writes to that port: see the threat model in "
                       "docs/multi-node.md; check the master still runs"))
