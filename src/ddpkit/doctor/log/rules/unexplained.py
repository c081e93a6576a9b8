"""Never "no failure" on a failed run (issue 24).

When no rule named an error, this rule looks at what the log still shows:

- failure lines (an exception, a traceback's last line, NCCL WARN, errno, a fatal signal, a
  non-zero exit, a watchdog, a refused/lost connection, any line the message catalogue files as
  an error) -> ``unexplained-failure``: a failure was seen, here are the decisive lines, here is
  how to find the cause;
- none of those before the launcher (or the scheduler) stopped the job -> ``stopped-while-waiting``:
  this node was healthy and waited for its peers; what it waited on, and the other nodes' logs.

Lines after the stop in the same file are its consequences (torchrun's own traceback, the
workers' SIGTERM), not failures of their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ddpkit.doctor.catalogue import CATALOGUE, entry
from ddpkit.doctor.findings import Evidence, Finding
from ddpkit.doctor.log.end_lines import TERMINATE
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.printed import EXIT_BARRIER_KEY
from ddpkit.doctor.log.messages import Message, catalogue
from ddpkit.doctor.log.patterns import FAILURE_KINDS
from ddpkit.doctor.log.prefixes import LAUNCHER_TAG, LINE_LABEL, RAY_TAG, RAY_TAG_UNNAMED, raised
from ddpkit.doctor.log.quiet import PYTHON_WARNING
from ddpkit.doctor.log.scan import Event
from ddpkit.doctor.wording import specific_then_general
from ddpkit.i18n import _, _n
from ddpkit.launch.torchrun.torch_log import GLOG_HEADER

# A rank's own failure line, whose template the catalogue may name a cause for (``named``).
_OWN_KINDS = frozenset({"exception", "failure-line", "nccl-warn"})
# what :meth:`UnexplainedRule.feed` reads
UNEXPLAINED_KINDS = FAILURE_KINDS | {"death-signal", "catalogued-warning", "benign"}
KEEP = 24  # failure lines remembered per log (the first ones; the decisive ones come early)
# A line printed at warning level (c10's "[W socket.cpp:464]", glog's "W1204 10:00:00.1 7
# run.py:9]", logging's "WARNING:"): an errno or an error word in it is no failure. Python's
# warnings are known by their format (quiet.PYTHON_WARNING), not by a category's name anywhere in
# a line: an error line may quote one.
_LEVELLED = re.compile(rf"^\s*(?:{LINE_LABEL})?(?:{LAUNCHER_TAG}\s?|{RAY_TAG})*{GLOG_HEADER}")
_LOGGING_WARNING = re.compile(rf"^\s*(?:{LINE_LABEL})?(?:{LAUNCHER_TAG}\s?|{RAY_TAG_UNNAMED})*"
                              r"WARNING[:\s]")


def _glog_level(text: str) -> str | None:
    """The level letter of the c10/glog header that starts ``text`` (after launcher tags)."""
    header = _LEVELLED.match(text)
    return header.group("level") if header else None


def warning_line(text: str) -> bool:
    """Whether ``text`` was printed at warning level (c10's ``[W``, glog's ``W1204``, logging's
    ``WARNING:``, Python's ``file.py:N: UserWarning:``): what it says is no failure of its own."""
    return (_glog_level(text) == "W" or _LOGGING_WARNING.match(text) is not None
            or PYTHON_WARNING.match(text) is not None)


def _c10d_error(text: str) -> bool:
    """A line c10d printed at error level ("[E socket.cpp:472] [c10d] ...", "[E1204 09:50:12.1 123
    path.cpp:462] [c10d] ..."): its words may be a warning's elsewhere."""
    return "c10d" in text and _glog_level(text) == "E"


# Catalogue mappings that name no cause of their own.
_GENERIC = frozenset({"unexplained-failure", "stopped-while-waiting", "no-failure"})


@dataclass
class _File:
    failures: list[Event] = field(default_factory=list)
    count: int = 0
    stop: Event | None = None  # the first death-signal/cancel line


class UnexplainedRule:
    """Feed it the events (those of ``UNEXPLAINED_KINDS`` count); ask for a finding once no
    rule named an error."""

    def __init__(self) -> None:
        self.files: dict[str, _File] = {}
        self.warned = Bag(limit=6)  # warning-level lines the catalogue files under a cause
        self.unplaced: Event | None = None  # an exception's line not at the start of its line

    def feed(self, event: Event) -> None:
        kind = event.kind
        if kind not in UNEXPLAINED_KINDS:
            return
        if kind == "catalogued-warning":
            self.warned.add(event)
            return
        if kind == "benign":
            self._at_exit(event)
            return
        if kind in ("failure-line", "exception") and warning_line(event.text):
            return
        if kind == "exception" and not raised(event.text):
            if self.unplaced is None:
                self.unplaced = event
            return
        state = self.files.get(event.file)
        if state is None:
            if len(self.files) >= 256:
                return
            state = self.files[event.file] = _File()
        if kind == "death-signal":
            if state.stop is None:
                state.stop = event
            return
        if state.stop is not None:
            return  # after the stop: its consequences
        state.count += event.repeat
        if len(state.failures) < KEEP and all(e.text != event.text for e in state.failures):
            state.failures.append(event)

    def _at_exit(self, event: Event) -> None:
        """A line the process printed at its exit, after its work (CUDA already unloaded): the
        C++ terminate whose what() it is (the line before) is that exit's too, no failure."""
        state = self.files.get(event.file)
        if not event.get("at_exit") or state is None or not state.failures:
            return
        last = state.failures[-1]
        if last.line == event.line - 1 and TERMINATE in last.text:
            state.failures.pop()
            state.count -= last.repeat

    def finding(self, waited_on: str) -> Finding | None:
        """``unexplained-failure`` or ``stopped-while-waiting``, or None when the log shows
        neither. ``waited_on`` says what the job was doing when last heard of."""
        shown: list[tuple[Event, Message | None]] = []
        waits: list[Event] = []  # lines whose source says this node was waiting for its peers
        for state in self.files.values():
            for event in state.failures:
                message = catalogue().match(event.text)
                if message is not None and message.maps == "benign" and not _c10d_error(
                        event.text):  # (c10d's error-level line is a failure, whatever its words)
                    continue
                if (message is not None and message.maps == "stopped-while-waiting"
                        or EXIT_BARRIER_KEY in event.text):  # (the agent's exit barrier)
                    waits.append(event)
                    continue
                shown.append((event, message))
        if shown:
            count = sum(s.count for s in self.files.values())
            return _catalogued(shown, count) or _unexplained(shown, count)
        stops = [s.stop for s in self.files.values() if s.stop is not None]
        if stops:
            return _stopped(stops, waited_on)
        if waits:
            return _waited(waits)
        if self.warned:
            return _warned(self.warned)
        return None

    def unplaced_exception(self) -> Finding | None:
        """``no-result`` for a log whose only sign of trouble is an exception's line that does
        not start its line (after a prefix ddpkit does not know, or quoted in another line): it
        may be the run's failure or only a mention of one, so "no failure" would claim more than
        the log shows."""
        if self.unplaced is None:
            return None
        e = entry("no-result")
        text = _("Line {line} names an exception ({text}) after words ddpkit does not know, so "
                 "it cannot tell whether a process raised it or a line only quotes it.",
                 line=self.unplaced.line, text=self.unplaced.text[:160])
        bag = Bag()
        bag.add(self.unplaced)
        return Finding(e.id, e.severity, e.title, specific_then_general(text, e.explanation),
                       e.fix, merge(bag.items))

    def named(self) -> Finding | None:
        """The cause the message catalogue names for a failure line (an exception, NCCL's WARN,
        an error line), when a rule saw only that a rank failed: the raise site in the library
        that printed it says what kind of failure it is (issue 24)."""
        shown: list[tuple[Event, Message | None]] = []
        for state in self.files.values():
            for event in state.failures:
                if event.kind not in _OWN_KINDS:
                    continue  # a peer gone, a timeout: another rule's consequence, not a cause
                message = catalogue().match(event.text)
                if message is not None and message.maps not in ("benign", "rank-failed"):
                    shown.append((event, message))
        return _catalogued(shown, sum(s.count for s in self.files.values())) if shown else None


def _quote(event: Event) -> Evidence:
    return Evidence(event.file, event.line, event.text)


def _unexplained(shown: list[tuple[Event, Message | None]], count: int) -> Finding:
    e = entry("unexplained-failure")
    first = shown[0][0]
    known = [(ev, m) for ev, m in shown if m is not None and m.error]
    parts: list[str] = [_n("{count} failure line, the first at {file}:{line}: `{text}`.",
                           "{count} failure lines, the first at {file}:{line}: `{text}`.", count,
                           file=first.file, line=first.line, text=first.text[:160])]
    if known:
        event, message = known[0]
        parts.append(_("Line {line} is printed by {where}.", line=event.line,
                       where=message.where))
    evidence = Bag(limit=6)
    for event, _message in shown[:3]:
        evidence.add(event)
    for event, _message in shown[-3:]:
        evidence.add(event)
    return Finding(e.id, e.severity, e.title, specific_then_general(parts, e.explanation), e.fix,
                   merge(evidence.items))


def _catalogued(shown: list[tuple[Event, Message | None]], count: int) -> Finding | None:
    """The finding the message catalogue files the first failure line under, when it names a
    cause: no rule read the line, but the program that printed it says what kind it is."""
    for event, message in shown:
        if (message is None or not message.error or message.maps not in CATALOGUE
                or message.maps in _GENERIC):
            continue
        e = entry(message.maps)
        general, fix = e.explanation, e.fix
        if _python_refusal(message):
            general = _("torch's Python code checked what it was given (a call's arguments, the "
                        "state of a module or tensor passed to it, or a launcher option) and "
                        "refused it; the message says what it expected.")
            fix = _("Change what the message names where it is given: the call the traceback "
                    "ends in (in the script, or the framework setting that makes that call), or "
                    "the launch command's option; then rerun. It is not an NCCL setting.")
        others = count - event.repeat
        more = (_n(" ({count} more failure line)", " ({count} more failure lines)", others)
                if others > 0 else "")
        text = _("`{text}` ({file}:{line}) is the message `{template}` ({where}); ddpkit's "
                 "message catalogue files it under {id}, and no rule of ddpkit's own read "
                 "it{more}. {general}", text=event.text[:200], file=event.file, line=event.line,
                 template=message.template[:160], where=message.where, id=e.id, more=more,
                 general=general)
        evidence = Bag(limit=6)
        evidence.add(event)
        for other, _message in shown[:5]:
            evidence.add(other)
        return Finding(e.id, "error", e.title, text, fix, merge(evidence.items))
    return None


def _python_refusal(message: Message) -> bool:
    """Whether ``message`` is a refusal raised by torch's own Python code (FSDP's, DTensor's,
    torchrun's argument checks...), not a setting NCCL rejected: then the invalid-usage entry's
    NCCL words (its variables, ``ddpkit nccl-conf show``) do not apply."""
    return message.maps == "invalid-usage" and message.source == "torch" and message.file.endswith(".py")


def _warned(warned: Bag) -> Finding | None:
    """The cause the catalogue files a warning-level line under, as a warning: the log shows its
    symptom, and nothing failed (issue 30: a warning-level template alone is at most a
    warning)."""
    first = warned.items[0]
    message = catalogue().match(first.text)
    if message is None or message.maps not in CATALOGUE:
        return None
    e = entry(message.maps)
    text = _("`{text}` ({file}:{line}{times}) is the message `{template}` ({where}), printed at "
             "warning level; ddpkit's message catalogue files it under {id}. Nothing in the log "
             "failed (no error line, exception or exit), so it is a warning: the run may still "
             "have been waiting, or recovered. {general}", text=first.text[:200],
             file=first.file, line=first.line,
             times=_n(", {count} time", ", {count} times", warned.count, count=warned.count),
             template=message.template[:160], where=message.where, id=e.id, general=e.explanation)
    return Finding(e.id, "warning", e.title, text, e.fix, merge(warned.items))


def _waited(waits: list[Event]) -> Finding:
    """torchrun's agent gave up at its exit barrier: this node's workers were done and it
    waited for the other nodes' agents (torch/distributed/elastic/agent/server/api.py). Where
    the logs of two nodes or more all end so, with nothing failing in any of them, every node's
    workers succeeded (the agent enters the barrier only then) and the agents still counted more
    than came: they were given different node counts."""
    first = waits[0]
    nodes = list(dict.fromkeys(w.file for w in waits))
    if len(nodes) > 1:
        e = entry("rendezvous-config")
        text = _("Every node whose log is read here ({count}) had finished its workers and then "
                 "waited at torchrun's exit barrier for more nodes than came, until it gave up "
                 "({file}:{line}): the nodes were started with different --nnodes (or the count "
                 "includes a node that never ran).", count=len(nodes), file=first.file,
                 line=first.line)
        fix = _("Start every node with the same --nnodes (and the same torchrun arguments but "
                "--node-rank); ddpkit launch hands every node one command.")
        return Finding(e.id, "error", e.title, text, fix, tuple(_quote(w) for w in waits[:6]))
    e = entry("stopped-while-waiting")
    text = _("This node's workers had finished and torchrun waited for the other nodes at its "
             "exit barrier ({file}:{line}); they did not all arrive. A node that failed or "
             "still ran holds the cause; if every node's workers finished, the nodes were "
             "started with different --nnodes. {general}",
             file=first.file, line=first.line, general=e.explanation)
    return Finding(e.id, e.severity, e.title, text, e.fix, tuple(_quote(w) for w in waits[:6]))


def _stopped(stops: list[Event], waited_on: str) -> Finding:
    e = entry("stopped-while-waiting")
    stop = stops[0]
    signal = stop.get("signal") or stop.get("detail")
    how = _("signal {number}", number=signal) if signal.isdigit() else signal
    text = _("The launcher was stopped ({how}, {file}:{line}) while it waited in {waited_on}. "
             "{general}", how=how, file=stop.file, line=stop.line, waited_on=waited_on,
             general=e.explanation)
    return Finding(e.id, e.severity, e.title, text, e.fix, tuple(_quote(s) for s in stops[:6]))

