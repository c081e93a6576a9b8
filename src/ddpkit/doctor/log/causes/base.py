"""The one interface of a cause: which events and facts it reads, how specific it is, which
generic findings it explains away, and its finding once every log is read."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ddpkit.doctor.catalogue import GENERIC, ORDER, entry
from ddpkit.doctor.findings import Evidence, Finding, Severity
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.rules.unexplained import warning_line
from ddpkit.doctor.log.scan import Event
from ddpkit.doctor.wording import specific_then_general
from ddpkit.wording import commas


@dataclass(frozen=True)
class Context:
    """What the whole reading says, handed to every cause once all logs are read."""

    multi_node: bool  # the job spans machines (two hosts, or a node count above one)
    failed: bool  # the logs show a failure (an error-level line, a non-zero exit, a timeout...)
    # the failure is the network's: a refused, lost or timed-out connection, an NCCL error, a
    # collective or rendezvous timeout, an init that never completed
    network_failed: bool = False

    @property
    def severity(self) -> Severity:
        """An error where the logs show a failure, else a warning: the severity of a cause whose
        own lines report none (a setting, a setup line, a stack) but explain a failure there is."""
        return "error" if self.failed else "warning"


class Cause:
    """A cause: subclass it in a file of its own and add the class to ``registry.CAUSES``.

    ``kinds``: the event kinds it reads (empty: every event); ``needs``: the kinds of fact it
    reads (an event without one of them is not fed; a cause that needs none is fed every event
    of its ``kinds``, which it then must name); ``specificity``: added to the finding's
    catalogue priority (how sure the facts make it); ``supersedes``: finding ids the other
    rules gave that this cause explains when it fires (they are dropped); ``yields_to``: ids
    whose error finding from another rule makes this cause's own finding needless (its own id
    is always among them, unless it supersedes it).
    """

    kinds: frozenset[str] = frozenset()
    needs: frozenset[FactKind] = frozenset()
    specificity = 10
    supersedes: frozenset[str] = GENERIC
    yields_to: frozenset[str] = frozenset()  # another rule's error of these ids says more

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        raise NotImplementedError

    def finding(self, context: Context) -> Finding | None:
        raise NotImplementedError


FEW = 4  # values of one kind a cause keeps to quote (the first ones, in order)


def others_first(finding_id: str) -> frozenset[str]:
    """``yields_to`` of a cause whose ``finding_id`` another rule's error explains better: every
    finding but the generic ones and its own (memory that ran out, a lost peer, a refused call
    says what went wrong first)."""
    return frozenset(ORDER) - GENERIC - {finding_id}


def keep_few(kept: dict[str, None], values: Iterable[str]) -> None:
    """Add ``values`` to ``kept``, in order, while it holds fewer than ``FEW``."""
    for value in values:
        if len(kept) < FEW:
            kept.setdefault(value)


class Noting(Cause):
    """A cause that notes the values its facts name (the first few, in order), the lines that
    named them, and whether one of those lines was printed above warning level."""

    def __init__(self) -> None:
        self.values: dict[str, None] = {}
        self.bag = Bag()
        self.failed = False  # a noted line printed above warning level

    @property
    def listed(self) -> str:
        """The values noted, for a finding's text (a value that is a translated text stays one)."""
        return commas(list(self.values))

    def note(self, event: Event, values: Sequence[str]) -> None:
        keep_few(self.values, values)
        self.bag.add(event)
        self.failed = self.failed or not self.at_warning_level(event.text)

    def at_warning_level(self, text: str) -> bool:
        """Whether a noted line was printed at warning level (c10's ``[W``, glog's, Python's)."""
        return warning_line(text)

    def severity(self, context: Context) -> Severity:
        """An error where a noted line, or the logs, show a failure; else a warning (issue 30:
        a warning-level line alone, with nothing failing, is at most a warning)."""
        return "error" if self.failed or context.failed else "warning"


class NotingValues(Noting):
    """A cause that notes the values of the fact kinds it needs, every line that states one,
    and whose finding, an error of ``finding_id``, is its :meth:`words` on them."""

    finding_id = ""

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        self.note(event, [f.value for f in facts if f.kind in self.needs])

    def words(self) -> tuple[str | Sequence[str], str | None]:
        """The finding's own text and its fix (None: the catalogue's), once a line was noted."""
        raise NotImplementedError

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text, fix = self.words()
        return made(self.finding_id, "error", text, fix, merge(self.bag.items))


def made(finding_id: str, severity: Severity, specific: str | Sequence[str], fix: str | None,
         evidence: tuple[Evidence, ...]) -> Finding:
    """A finding of the catalogue's ``finding_id`` with the cause's own words first."""
    e = entry(finding_id)
    words = specific if isinstance(specific, str) else list(specific)
    return Finding(e.id, severity, e.title, specific_then_general(words, e.explanation),
                   fix if fix is not None else e.fix, evidence)


class InternalError(NotingValues):
    """A cause whose finding is ``internal-error``: a check of a library's own state failed (its
    bug, or builds that do not fit together), which ranks below any other cause the log names."""

    finding_id = "internal-error"
    specificity = 5
    supersedes = GENERIC
    yields_to = others_first("internal-error")
