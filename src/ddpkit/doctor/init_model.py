"""How far each rank got through NCCL's init sequence, from the lines the log shows (issue 12).

Stages, in order: ``bootstrap`` (a Bootstrap/NET interface line), ``network`` (NCCL picked its
transport), ``init started`` (a communicator line: ``comm 0x... rank R nranks N``, ``Init START``)
and ``init complete``. A hang is named by where each rank (or machine) stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ddpkit.doctor.evidence import Capped, display_origin
from ddpkit.doctor.logscan import Event

STAGES = ("bootstrap", "network", "init started", "init complete")
_STAGE_OF_KIND = {"nccl-bootstrap": 0, "nccl-socket-ifaces": 0, "nccl-socket-item": 0,
                  "nccl-network": 1}


@dataclass
class _Progress:
    stage: int = -1
    ranks: set[str] = field(default_factory=set)
    line: str = ""


class InitModel:
    """Per machine (host, launcher node or file): the furthest init stage reached."""

    def __init__(self) -> None:
        self.progress: Capped[str, _Progress] = Capped()
        self.ranks_started: set[str] = set()
        self.world: int = 0

    def feed(self, event: Event) -> None:
        stage = _STAGE_OF_KIND.get(event.kind)
        if event.kind == "nccl-comm":
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
        if event.kind == "nccl-comm" and len(progress.ranks) < 64:
            progress.ranks.add(event.get("rank"))

    def where_each_stopped(self) -> str:
        """One clause per machine, e.g. ``gpu1 stopped after init started (ranks 0, 1)``."""
        parts = []
        for origin, progress in sorted(self.progress.items()):
            if progress.stage < 0:
                continue
            ranks = sorted(progress.ranks, key=lambda r: int(r) if r.isdigit() else -1)
            who = f" (rank{'s' if len(ranks) > 1 else ''} {', '.join(ranks[:8])})" if ranks else ""
            parts.append(f"{display_origin(origin)} stopped after {STAGES[progress.stage]}{who}")
        return "; ".join(parts[:8])

    def missing_ranks(self) -> list[int]:
        """Ranks of the communicator that never printed their init line (when any did)."""
        if not self.world or not self.ranks_started or self.world > 4096:
            return []
        seen = {int(r) for r in self.ranks_started if r.isdigit()}
        return sorted(set(range(self.world)) - seen)
