"""What happened on each node of a job, and which failure came first across the whole job (pure).

torchrun names the first failure on its own node only. With several nodes, a rank that dies takes
its peers down with it a moment later ("Connection reset by peer" on every other node), and the
order in which the nodes' reports arrive is a race. So the first failure is chosen in two steps:

1. a failure that is a *consequence* of another loses to one that is not. A node that read its
   failed rank's end (doctor/log/rank_ends.py, through launch.node.result) says so in ``cause``,
   and that verdict decides; otherwise the words decide: a rank stopped by
   SIGTERM/SIGINT/SIGHUP, or one whose last words are a peer's connection going away or a
   collective timing out (:data:`CONSEQUENCE_PATTERNS`); a node lost altogether (its ssh session
   or its heartbeat died) is never a consequence, and a rank killed by any other signal only when
   its last words say so (with torch 2.13's Gloo a rank that raised "Connection reset by peer"
   can then abort at interpreter exit, SIGABRT: launch/torchrun/tracebacks.py); a silent SIGKILL or
   SIGSEGV stays a cause;
2. among the rest, the earliest observed wins (then the lowest node rank).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ddpkit.error_ids import JOB_STOPPED
from ddpkit.errors import DdpkitError
from ddpkit.i18n import _
from ddpkit.plain_text import shown
from ddpkit.wording import clauses, ranges

NodeState = Literal["ok", "failed", "lost", "stopped", "interrupted"]  # how one node ended
OK: NodeState = "ok"
FAILED: NodeState = "failed"
LOST: NodeState = "lost"
STOPPED: NodeState = "stopped"
INTERRUPTED: NodeState = "interrupted"
NODE_STATES: tuple[NodeState, ...] = (OK, FAILED, LOST, STOPPED, INTERRUPTED)
JobMode = Literal["hosts", "join"]  # the whole job over ssh, or with a join token
FAILURE_STATES = (FAILED, LOST)
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")
CONSEQUENCE_PATTERNS = (
    "connection reset by peer",
    "connection closed by peer",
    "connection was likely closed",
    "broken pipe",
    "connection refused",
    "socket closed",
    "nccl communicator was aborted",
    "ncclremoteerror",
    "remote process exited",
    "timed out",
    "timeout",
)
INTERRUPTED_EXIT = 130
STATE_WORDS: Mapping[NodeState, str] = {OK: _("ok"), FAILED: _("failed"), LOST: _("lost"),
                                        STOPPED: _("stopped"), INTERRUPTED: _("interrupted")}


def state_word(state: NodeState) -> str:
    """How a node ended, in words (the state itself stays English in JSON)."""
    return STATE_WORDS.get(state, state)


def describe_exit(exitcode: int, signal: str | None = None) -> str:
    """'exit code 3' or 'killed by SIGKILL' (negative codes are deaths by signal)."""
    if exitcode < 0:
        import signal as signal_module

        try:
            name = signal or signal_module.Signals(-exitcode).name
        except ValueError:
            name = signal or _("signal {number}", number=-exitcode)
        return _("killed by {signal}", signal=name)
    return _("exit code {code}", code=exitcode)


FIX_LIMIT = 600  # characters of a node's fix kept from the wire: one paragraph, never a flood


@dataclass(frozen=True)
class NodeOutcome:
    """How one node's share ended, reduced to what a job summary needs."""

    node_rank: int
    host: str
    state: NodeState
    message: str = ""
    error_id: str | None = None
    rank: int | None = None  # the failing global rank, when a rank failed
    local_rank: int | None = None
    exitcode: int | None = None
    signal: str | None = None
    last_lines: tuple[str, ...] = ()
    observed_at: float = 0.0  # the supervisor's clock when it learned of this end
    returncode: int | None = None
    cause: bool | None = None  # the node's own reading of its failed rank's end (None: unknown)
    raised: str = ""  # what that rank raised: "ValueError: x (at train.py:8 in <module>)"
    fix: str = ""  # the node's fix for that end when the end names its cause (node/result.py)
    document: Mapping[str, Any] | None = field(default=None, compare=False)
    stack_reports: tuple[Mapping[str, Any], ...] = field(default=(), compare=False)
    # ^ the node's hang reports (every local rank's stack), carried to a join master as JSON
    logs: Mapping[str, Any] | None = field(default=None, compare=False)
    # ^ the node's reading of its run directory (doctor/log/verdict.NodeLogs as JSON): what the
    #   master's summary is judged from, by the engine of ``doctor --log``

    @property
    def failed(self) -> bool:
        return self.state in FAILURE_STATES

    def how(self) -> str:
        if self.exitcode is not None:
            return describe_exit(self.exitcode, self.signal)
        return self.message or state_word(self.state)

    def where(self) -> str:
        if self.rank is None:
            return _("node {node} ({host})", node=self.node_rank, host=self.host)
        if self.local_rank is None:
            return _("node {node} ({host}, rank {rank})", node=self.node_rank, host=self.host,
                     rank=self.rank)
        return _("node {node} ({host}, rank {rank}, local rank {local})", node=self.node_rank,
                 host=self.host, rank=self.rank, local=self.local_rank)

    def ended(self) -> str:
        """``node 1 (gpu2) failed: exit code 1``: the stop order's reason, and a status line."""
        return _("node {node} ({host}) {state}: {how}", node=self.node_rank, host=self.host,
                 state=state_word(self.state), how=self.how())

    def to_dict(self, *, logs: bool = True) -> dict[str, Any]:
        """As JSON; ``logs=False`` leaves out the node's reading of its logs (a job's payload)."""
        return {
            "node_rank": self.node_rank, "host": self.host, "state": self.state,
            "message": self.message, "error_id": self.error_id, "rank": self.rank,
            "local_rank": self.local_rank, "exitcode": self.exitcode, "signal": self.signal,
            "how": self.how() if self.failed else None, "last_lines": list(self.last_lines),
            "returncode": self.returncode, "cause": self.cause, "raised": self.raised or None,
            "fix": self.fix or None,
            **({"stack_reports": [dict(r) for r in self.stack_reports]} if self.stack_reports else {}),
            **({"logs": dict(self.logs)} if logs and self.logs is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, observed_at: float = 0.0) -> NodeOutcome:
        def optional_int(key: str) -> int | None:
            value = data.get(key)
            return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
                else None

        state = str(data.get("state", FAILED))
        return cls(
            node_rank=int(data["node_rank"]), host=str(data.get("host", "?")),
            state=next((s for s in NODE_STATES if s == state), FAILED),
            message=str(data.get("message", "")),
            error_id=str(data["error_id"]) if data.get("error_id") else None,
            rank=optional_int("rank"), local_rank=optional_int("local_rank"),
            exitcode=optional_int("exitcode"),
            signal=str(data["signal"]) if data.get("signal") else None,
            last_lines=tuple(str(x) for x in data.get("last_lines", ()) or ()),
            observed_at=observed_at, returncode=optional_int("returncode"),
            cause=data["cause"] if isinstance(data.get("cause"), bool) else None,
            raised=str(data.get("raised") or ""),
            fix=shown(str(data.get("fix") or ""), FIX_LIMIT),
            stack_reports=tuple(r for r in data.get("stack_reports") or () if isinstance(r, Mapping)),
            logs=data["logs"] if isinstance(data.get("logs"), Mapping) else None,
        )


@dataclass(frozen=True)
class JobResult:
    """How a whole job went, as a job driver (``hosts_driver``, ``join_driver``) returns it: one
    outcome per node in node order, the master it used, and every rank's stacks grouped across
    the nodes (``jobstacks``) when any node dumped them."""

    mode: JobMode
    master: Mapping[str, str]  # address and reason (and, in token mode, the interface)
    outcomes: tuple[NodeOutcome, ...]
    stack_lines: tuple[str, ...] = ()
    stack_reports: tuple[Mapping[str, Any], ...] = ()
    own_error: DdpkitError | None = field(default=None, compare=False)
    # ^ token mode: the DdpkitError node 0's own share raised (its outcome is in ``outcomes``)
    own_code: int = 0  # token mode: the exit code node 0's own share returned

    @property
    def first_failure(self) -> NodeOutcome | None:
        return first_failure(self.outcomes)

    @property
    def ok(self) -> bool:
        return self.first_failure is None and self.own_error is None

    def payload(self) -> dict[str, Any]:
        """The job as JSON: the ``job`` part of every whole-job document."""
        first = self.first_failure
        return {"ok": self.ok, "mode": self.mode, "master": dict(self.master),
                "first_failure": first.to_dict(logs=False) if first else None,
                "nodes": [o.to_dict(logs=False) for o in self.outcomes],
                "stacks": {"summary": list(self.stack_lines),
                           "reports": [dict(r) for r in self.stack_reports]}
                if self.stack_reports else None}


def is_consequence(outcome: NodeOutcome) -> bool:
    """True when this failure looks caused by another one (see the module docstring)."""
    if outcome.state == LOST:
        return False
    if outcome.cause is not None:  # the node read its rank's end: doctor/log/rank_ends.py
        return not outcome.cause
    if outcome.signal in STOP_SIGNALS:
        return True
    if outcome.exitcode is not None and -outcome.exitcode in (1, 2, 15):
        return True  # SIGHUP, SIGINT, SIGTERM
    text = " ".join((outcome.message, *outcome.last_lines)).lower()
    return any(pattern in text for pattern in CONSEQUENCE_PATTERNS)


def first_failure(outcomes: Sequence[NodeOutcome]) -> NodeOutcome | None:
    """The failure that started it all, or None when no node failed (stopped nodes never count)."""
    candidates = [o for o in outcomes if o.failed]
    if not candidates:
        return None
    return min(candidates, key=lambda o: (is_consequence(o), o.observed_at, o.node_rank))


GROUP_STOPPED_ABOVE = 3  # more nodes merely stopped than this: one clause with their ranks


def job_summary(outcomes: Sequence[NodeOutcome], first: NodeOutcome | None = None) -> str:
    """One paragraph: the first failure (where, how, its last lines), then what the others did;
    ``first``: the failure to name first, when the caller judged it (else :func:`first_failure`)."""
    first = first or first_failure(outcomes)
    if first is None:
        stopped = [o for o in outcomes if o.state in (STOPPED, INTERRUPTED)]
        if stopped:
            return _("the job was stopped: {nodes}", nodes=clauses([
                _("node {node} ({host}) {state}", node=o.node_rank, host=o.host,
                  state=state_word(o.state)) for o in sorted(stopped, key=_order)]))
        return _("all {count} nodes finished successfully", count=len(outcomes))
    text = _("{where} failed first: {how}", where=first.where(), how=first.how())
    if first.exitcode is None and first.error_id:
        text = _("{summary} [{id}]", summary=text, id=first.error_id)
    if first.raised:
        text = _("{summary}. It raised {raised}", summary=text, raised=first.raised)
    if first.last_lines:
        text = _("{summary}. Its last output: {lines}", summary=text,
                 lines=" | ".join(first.last_lines))
    others = [o for o in sorted(outcomes, key=_order) if o is not first and o.state != OK]
    if others:
        quiet = [o for o in others if not o.failed]
        grouped = len(quiet) > GROUP_STOPPED_ABOVE  # at scale: "nodes 0-26,28-31 were stopped"
        parts = [_("node {node} ({host}) failed too ({how})", node=o.node_rank, host=o.host,
                   how=o.how()) if o.failed else
                 _("node {node} ({host}) was {state}", node=o.node_rank, host=o.host,
                   state=state_word(o.state)) for o in others if o.failed or not grouped]
        if grouped:
            words: dict[str, list[int]] = {}
            for o in quiet:
                words.setdefault(state_word(o.state), []).append(o.node_rank)
            parts += [_("nodes {nodes} were {state} ({count})", nodes=ranges(ranks),
                        state=word, count=len(ranks)) for word, ranks in words.items()]
        text = _("{summary}. Then: {others}", summary=text, others=clauses(parts))
    return text


def last_output_lines(message: str) -> tuple[str, ...]:
    """The "Its last output: a | b" part of a node's failure summary, as lines."""
    _head, sep, tail = message.partition("Its last output: ")
    return tuple(part.strip() for part in tail.split(" | ") if part.strip()) if sep else ()


def _order(outcome: NodeOutcome) -> int:
    return outcome.node_rank


def outcome_from_error(error: Mapping[str, Any], *, node_rank: int, host: str,
                       observed_at: float = 0.0, returncode: int | None = None,
                       stopped: bool = False) -> NodeOutcome:
    """A node's outcome from the ``error`` part of its JSON (``DdpkitError.to_dict()``)."""
    error_id = str(error.get("id", "error"))
    message = str(error.get("message", ""))
    details = error.get("details") or {}
    root = details.get("root_cause") if isinstance(details, Mapping) else None
    if not isinstance(root, Mapping):
        failures = details.get("failures") if isinstance(details, Mapping) else None
        root = failures[0] if isinstance(failures, list) and failures and \
            isinstance(failures[0], Mapping) else None
    told_to_stop = root is None or root.get("signal") in STOP_SIGNALS
    state = STOPPED if error_id == JOB_STOPPED or (stopped and told_to_stop) else FAILED
    fields: dict[str, Any] = {}
    if root is not None:
        fields = {"rank": root.get("rank"), "local_rank": root.get("local_rank"),
                  "exitcode": root.get("exitcode"), "signal": root.get("signal")}
    end = details.get("root_end") if isinstance(details, Mapping) else None
    if isinstance(end, Mapping) and state == FAILED:
        exception = end.get("exception")
        fields["cause"] = end.get("cause")
        fields["raised"] = exception.get("text") if isinstance(exception, Mapping) else None
    if state == FAILED and isinstance(details, Mapping):
        fields["fix"] = details.get("known_fix")
    return NodeOutcome.from_dict({
        "node_rank": node_rank, "host": host, "state": state, "message": message,
        "error_id": error_id, "last_lines": last_output_lines(message), "returncode": returncode,
        "stack_reports": details.get("stack_reports") if isinstance(details, Mapping) else None,
        "logs": details.get("logs") if isinstance(details, Mapping) else None,
        **fields,
    }, observed_at=observed_at)
