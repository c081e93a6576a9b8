"""The scan's first sieve: the anchors (a few regexes and literals, found at C speed in a whole
buffer) that mark the candidate lines, and the trigger literals that pick, for each candidate,
the patterns worth trying (doctor/log/patterns.py holds both)."""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable

from ddpkit.doctor.log.line_pattern import LinePattern
from ddpkit.doctor.log.patterns import ANCHORS, PATTERNS, TAIL_ANCHORS, trigger_strings

# Every trigger is found by an anchor of the main pass or of the tail pass (TAIL_ANCHORS).
ANCHOR_RES: tuple[re.Pattern[bytes], ...] = tuple(re.compile(a) for a in (*ANCHORS, *TAIL_ANCHORS))
TRIGGERS = sorted({t.encode() for t in trigger_strings()})


def _anchor_key(anchor: bytes) -> bytes:
    """The literal every match of ``anchor`` starts with (an ``in`` test for it is cheap)."""
    return re.split(rb"[(\[\\?*+|]", anchor, maxsplit=1)[0]


def _group_triggers() -> tuple[tuple[bytes, tuple[bytes, ...]], ...]:
    """Triggers grouped under the first anchor key they contain: a line lacking the key cannot
    contain any trigger of its group, so most triggers are never tested on most lines."""
    groups: dict[bytes, list[bytes]] = {}
    keys = [_anchor_key(a) for a in (*ANCHORS, *TAIL_ANCHORS)]
    for trigger in TRIGGERS:
        key = next((k for k in keys if k in trigger), b"")
        groups.setdefault(key, []).append(trigger)
    return tuple((key, tuple(items)) for key, items in groups.items())


TRIGGER_GROUPS = _group_triggers()
MAIN_GROUPS = tuple(g for g in TRIGGER_GROUPS if g[0] not in TAIL_ANCHORS)  # tail's: tail_hits
_BY_TRIGGER: dict[bytes, frozenset[int]] = {}
for _index, _pattern in enumerate(PATTERNS):
    for _trigger in _pattern.triggers:
        _key = _trigger.encode()
        _BY_TRIGGER[_key] = _BY_TRIGGER.get(_key, frozenset()) | {_index}


def triggers_in(raw: bytes, groups: tuple[tuple[bytes, tuple[bytes, ...]], ...] = TRIGGER_GROUPS
                ) -> frozenset[bytes]:
    """The trigger literals ``raw`` contains."""
    return frozenset(t for key, group in groups if key in raw for t in group if t in raw)


ALL_PATTERNS = tuple(PATTERNS)
_SELECTION_CACHE: dict[frozenset[bytes], tuple[LinePattern, ...]] = {}


def patterns_for(found: frozenset[bytes]) -> tuple[LinePattern, ...]:
    cached = _SELECTION_CACHE.get(found)
    if cached is None:
        chosen: frozenset[int] = frozenset()
        for literal in found:
            chosen |= _BY_TRIGGER.get(literal, frozenset())
        cached = tuple(PATTERNS[i] for i in sorted(chosen))
        if len(_SELECTION_CACHE) < 4096:
            _SELECTION_CACHE[found] = cached
    return cached


# Anchors that are plain literals are found with bytes.find (C fastsearch), the others by regex.
_REGEX_SYNTAX = frozenset(b".^$*+?{}[]\\|()")
_LITERAL_ANCHORS = tuple(a for a in ANCHORS if not _REGEX_SYNTAX & set(a))
_REGEX_ANCHORS = tuple(r for a, r in zip(ANCHORS, ANCHOR_RES, strict=False)
                       if _REGEX_SYNTAX & set(a))


class AnchorHits:
    """The anchors' matches in one buffer, found lazily: :meth:`next_from` gives the first match
    at or after a position, so a stretch the scan skips whole (a retry loop's copies, the
    alternating lines of several processes) costs one search per anchor, not one per line."""

    def __init__(self, buf: bytes, limit: int) -> None:
        self.buf, self.limit = buf, limit
        self.heap: list[tuple[int, int]] = []  # (a match's start, the anchor's index)
        for index in range(len(_SEARCHES)):
            self._push(index, 0)

    def _push(self, index: int, start: int) -> None:
        found = _SEARCHES[index](self.buf, start, self.limit)
        if found >= 0:
            heapq.heappush(self.heap, (found, index))

    def next_from(self, pos: int) -> int:
        """The start of the first anchor match at or after ``pos`` (-1: none before the limit)."""
        heap = self.heap
        while heap:
            found, index = heap[0]
            if found >= pos:
                return found
            heapq.heappop(heap)
            self._push(index, pos)
        return -1


def _literal_search(literal: bytes) -> Callable[[bytes, int, int], int]:
    return lambda buf, start, limit: buf.find(literal, start, limit)


def _regex_search(anchor: re.Pattern[bytes]) -> Callable[[bytes, int, int], int]:
    def search(buf: bytes, start: int, limit: int) -> int:
        match = anchor.search(buf, start, limit)
        return -1 if match is None else match.start()
    return search


_SEARCHES = tuple([_regex_search(r) for r in _REGEX_ANCHORS]
                  + [_literal_search(a) for a in _LITERAL_ANCHORS])
