"""What each machine's NCCL init showed, from the lines the log shows (issue 12).

Per machine (host, launcher node, or the log file when the lines carry no prefix) the model keeps:

- how far it got: ``bootstrap`` (a Bootstrap/NET interface line), ``network`` (NCCL picked its
  transport), ``init started`` (a communicator line: ``comm 0x... rank R nranks N``, ``Init
  START``; or, from releases 2.4 to 2.11 that print no ``Init START``, the trees NCCL lays out
  inside ncclCommInitRank) and ``init complete``; a hang is named by where each machine stopped;
- where each rank runs when the log says so (nccl-tests' ``Rank 0 ... Pid ... on HOST`` table);
- what it ran with: the NCCL version, the transport NCCL chose (``Using network IB``, before 2.5
  ``Using internal Network IB``), the net plugin it loaded (or that it used the internal one) and
  the torch version (``collect_env``'s ``PyTorch version:``, a ``torch==`` pip line).

The second half is what :mod:`ddpkit.doctor.log.rules.nodes` compares across machines and files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ddpkit.doctor.log.evidence import Bag, Capped, display_origin
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _, _n
from ddpkit.wording import clauses

STAGES = (_("bootstrap"), _("network"), _("init started"), _("init complete"))
_STAGE_OF_KIND = {"nccl-bootstrap": 0, "nccl-socket-ifaces": 0, "nccl-socket-item": 0,
                  "nccl-network": 1, "nccl-trees": 2}
# The first release whose init prints ``Init COMPLETE`` (releases before 2.12 print no START).
_COMPLETE_SINCE = (2, 4)
INTERNAL_PLUGIN = _("the internal one (no net plugin)")
# What a NET/Plugin line says about the plugin a rank uses. Lines about probing (a symbol not
# found in a plugin that did load, a dlopen that failed before the fallback line) say nothing.
_LOADED = re.compile(r"Loaded (?:net|coll) plugin (?P<name>.+?)(?: \(v\d+\))?\s*$|"
                     r"Plugin Path ?: ?(?P<path>\S+)")
_INTERNAL = re.compile(r"No plugin found|Could not find: libnccl-net|Using internal (?:network "
                       r"plugin|implementation)")


@dataclass
class _Progress:
    stage: int = -1
    ranks: set[str] = field(default_factory=set)
    line: str = ""


class Reported:
    """Which machines reported which value of one fact, with the lines that said it (bounded)."""

    def __init__(self) -> None:
        self.origins: Capped[str, set[str]] = Capped(16)
        self.bags: Capped[str, Bag] = Capped(16)
        self.first: Capped[str, str] = Capped()  # per machine, the first value it reported

    def add(self, value: str, event: Event) -> None:
        origins = self.origins.slot(value, set)
        bag = self.bags.slot(value, Bag)
        if origins is None or bag is None:
            return
        if len(origins) < 64:
            origins.add(event.origin)
        bag.add(event)
        self.first.slot(event.origin, lambda: value)

    def forget(self, origin: str, value: str) -> None:
        """``origin`` did not in the end use ``value`` (a later line says what it used)."""
        origins = self.origins.data.get(value)
        if origins is not None:
            origins.discard(origin)
            if not origins:
                del self.origins.data[value]
                self.bags.data.pop(value, None)
        if self.first.data.get(origin) == value:
            del self.first.data[origin]

    def values(self) -> list[str]:
        return sorted(self.origins.data)

    def machines(self) -> set[str]:
        return {o for origins in self.origins.data.values() for o in origins}

    def per_machine_differs(self) -> bool:
        """Two machines reported different values (a file's unprefixed lines count as one)."""
        return len(set(self.first.data.values())) > 1

    def listing(self) -> str:
        """``2.18.1 on vm-0; 2.14.3 on vm-1``, one clause per value."""
        return clauses([_("{value} on {hosts}", value=value,
                         hosts=", ".join(sorted(display_origin(o) for o in origins)))
                       for value, origins in sorted(self.origins.items())])

    def evidence(self) -> list[Bag]:
        return [bag for _, bag in sorted(self.bags.items())]


class InitModel:
    """Per machine: the furthest init stage reached, and the versions and transport it used."""

    def __init__(self) -> None:
        self.progress: Capped[str, _Progress] = Capped()
        self.ranks_started: set[str] = set()
        self.world: int = 0
        self.nccl = Reported()
        self.network = Reported()
        self.plugin = Reported()
        self.torch = Reported()
        self._plugin_loaded: set[str] = set()
        self.trees = Bag()  # tree layouts: init had started
        self.comm_lines = 0  # communicator lines of any phase
        self.placed: Capped[str, str] = Capped(4096)  # rank -> host, from nccl-tests' table
        self.placed_bag = Bag()

    def feed(self, event: Event) -> None:
        kind = event.kind
        if kind == "nccl-version":
            self.nccl.add(event.get("version"), event)
        elif kind == "nccl-network":
            self.network.add(event.get("name"), event)
        elif kind == "nccl-plugin":
            self._note_plugin(event)
        elif kind == "torch-version":
            self.torch.add(event.get("version"), event)
        elif kind == "nccl-trees":
            self.trees.add(event)
        elif kind == "nccltests-rank":
            self.placed.slot(event.get("rank"), lambda: event.get("host"))
            self.placed_bag.add(event)
        stage = _STAGE_OF_KIND.get(kind)
        if kind == "nccl-comm":
            self.comm_lines += event.repeat
            stage = 3 if event.get("phase") == "COMPLETE" else 2
            rank = event.get("rank")
            if stage == 2 and len(self.ranks_started) < 4096:
                self.ranks_started.add(rank)
            self.world = max(self.world, int(event.get("nranks", "0") or 0))
        if stage is None:
            return
        progress = self.progress.slot(event.origin, _Progress)
        if progress is None:
            return
        if stage >= progress.stage:
            progress.stage, progress.line = stage, event.text
        if kind == "nccl-comm" and len(progress.ranks) < 64:
            progress.ranks.add(event.get("rank"))

    def _note_plugin(self, event: Event) -> None:
        """A loaded plugin wins over the fallback: NCCL may look for libnccl-net.so first."""
        detail = event.get("detail")
        loaded = _LOADED.search(detail)
        if loaded:
            name = loaded.group("name") or loaded.group("path")
            if event.origin not in self._plugin_loaded and len(self._plugin_loaded) < 256:
                self._plugin_loaded.add(event.origin)
                self.plugin.forget(event.origin, INTERNAL_PLUGIN)
            self.plugin.add(name, event)
        elif _INTERNAL.search(detail) and event.origin not in self._plugin_loaded:
            self.plugin.add(INTERNAL_PLUGIN, event)

    def where_each_stopped(self) -> str:
        """One clause per machine, e.g. ``gpu1 stopped after init started (ranks 0, 1)``."""
        parts: list[str] = []
        for origin, progress in sorted(self.progress.items()):
            if progress.stage < 0:
                continue
            ranks = sorted(progress.ranks, key=lambda r: int(r) if r.isdigit() else -1)
            who = _n(" (rank {ranks})", " (ranks {ranks})", len(ranks),
                     ranks=", ".join(ranks[:8])) if ranks else ""
            parts.append(_("{host} stopped after {stage}{who}", host=display_origin(origin),
                           stage=STAGES[progress.stage], who=who))
        return clauses(parts[:8])

    def started_without_comm_line(self) -> bool:
        """NCCL laid out its trees, so init had started, in a release that prints no ``Init
        START`` (2.4 to 2.11: only ``Init COMPLETE``, and that never came). Not read when no line
        states the version: before 2.4 no ``Init COMPLETE`` is printed at all."""
        if not self.trees or self.comm_lines:
            return False
        return any(_release(v) >= _COMPLETE_SINCE for v in self.nccl.values())

    def placed_on_one_host(self) -> bool:
        """The log places every rank of the job (0 .. N-1, N >= 2) on one and the same host."""
        ranks = {int(r) for r in self.placed.data if r.isdigit()}
        hosts = set(self.placed.data.values())
        count = len(ranks)
        return (count >= 2 and len(hosts) == 1 and ranks == set(range(count))
                and self.world in (0, count))

    def missing_ranks(self) -> list[int]:
        """Ranks of the communicator that never printed their init line (when any did)."""
        if not self.world or not self.ranks_started or self.world > 4096:
            return []
        seen = {int(r) for r in self.ranks_started if r.isdigit()}
        return sorted(set(range(self.world)) - seen)


def _release(version: str) -> tuple[int, int]:
    """``2.11.4`` -> (2, 11)."""
    major, minor = (version.split(".") + ["0"])[:2]
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else (0, 0)
