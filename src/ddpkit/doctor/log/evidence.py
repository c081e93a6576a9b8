"""Bounded collections for the log rules (memory stays constant however long the log is), and
how the rules name where a fact came from."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from ddpkit.doctor.findings import Evidence
from ddpkit.doctor.log.scan import Event

EVIDENCE_PER_FINDING = 6
MAX_KEYS = 256  # distinct hosts/addresses/ranks remembered per kind of fact

K = TypeVar("K")
V = TypeVar("V")


class Bag:
    """The first few supporting lines of one fact, and how many there were in all."""

    __slots__ = ("count", "items", "limit")

    def __init__(self, limit: int = EVIDENCE_PER_FINDING) -> None:
        self.items: list[Evidence] = []
        self.count = 0
        self.limit = limit

    def add(self, event: Event) -> None:
        self.count += event.repeat
        if len(self.items) < self.limit:
            self.items.append(Evidence(event.file, event.line, event.text))

    def __bool__(self) -> bool:
        return self.count > 0

    @property
    def first(self) -> Evidence | None:
        return self.items[0] if self.items else None


def merge(*groups: Iterable[Evidence], limit: int = EVIDENCE_PER_FINDING) -> tuple[Evidence, ...]:
    """Evidence from several bags: deduplicated, in file:line order, at most ``limit``.

    Each group contributes its first line before any group contributes a second, so every kind
    of support is shown even when one kind is plentiful.
    """
    lists = [list(group) for group in groups]
    chosen: list[Evidence] = []
    seen: set[Evidence] = set()
    depth = 0
    while len(chosen) < limit and any(depth < len(items) for items in lists):
        for items in lists:
            if depth < len(items) and items[depth] not in seen and len(chosen) < limit:
                seen.add(items[depth])
                chosen.append(items[depth])
        depth += 1
    return tuple(sorted(chosen, key=lambda e: (e.file, e.line)))


class Capped(Generic[K, V]):
    """A dict that stops accepting new keys after ``limit`` (existing keys still update)."""

    __slots__ = ("data", "limit")

    def __init__(self, limit: int = MAX_KEYS) -> None:
        self.data: dict[K, V] = {}
        self.limit = limit

    def slot(self, key: K, factory: Callable[[], V]) -> V | None:
        """The value for ``key``, created by ``factory()`` while room is left; else None."""
        value = self.data.get(key)
        if value is None and len(self.data) < self.limit:
            value = self.data[key] = factory()
        return value

    def items(self) -> list[tuple[K, V]]:
        return list(self.data.items())

    def __len__(self) -> int:
        return len(self.data)


def display_origin(origin: str) -> str:
    """An origin for prose: the host or node, or the log's file name when that is all we know."""
    return origin[5:].rsplit("/", 1)[-1] if origin.startswith("file:") else origin


def origins_text(origins: Iterable[str]) -> str:
    return ", ".join(sorted(display_origin(o) for o in origins))
