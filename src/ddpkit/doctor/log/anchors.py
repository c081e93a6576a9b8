"""The scan's first sieve: the anchors (a few regexes and literals, found in one pass over a
buffer) that mark the candidate lines, and the trigger literals that pick, for each candidate,
the patterns worth trying (doctor/log/anchor_words.py and doctor/log/patterns.py hold them).

Every anchor starts with a literal (its key). One Aho-Corasick automaton (the ahocorasick_rs
package, Rust's aho-corasick crate) finds all the keys in one pass over a window of the buffer,
so an anchor costs about nothing more than the pass; an anchor that is a regex is then tried
only where its key stands."""

from __future__ import annotations

import bisect
import re

from ahocorasick_rs import BytesAhoCorasick

from ddpkit.doctor.log.anchor_words import ANCHORS, TAIL_ANCHORS
from ddpkit.doctor.log.line_pattern import LinePattern
from ddpkit.doctor.log.patterns import PATTERNS, trigger_strings

# Every trigger is found by an anchor of the main pass or of the tail pass (TAIL_ANCHORS, which
# are literals: the tail pass looks for them as they are, doctor/log/tail.py).
ANCHOR_RES: tuple[re.Pattern[bytes], ...] = (*(re.compile(a) for a in ANCHORS),
                                             *(re.compile(re.escape(a)) for a in TAIL_ANCHORS))
TRIGGERS = sorted({t.encode() for t in trigger_strings()})

_SYNTAX = b".^$*+?{}[]\\|()"
_OPTIONAL = b"?*{"  # quantifiers that may leave the character before them out


def literal_prefix(anchor: bytes) -> bytes:
    """The literal every match of the regex ``anchor`` starts with (the whole anchor when it is a
    plain literal). An alternation at the regex's top level has no such prefix: ValueError."""
    depth, escaped, in_class = 0, False, False
    for char in anchor:
        if escaped:
            escaped = False
        elif char == 0x5C:  # backslash
            escaped = True
        elif in_class:
            in_class = char != 0x5D
        elif char == 0x5B:
            in_class = True
        elif char == 0x28:
            depth += 1
        elif char == 0x29:
            depth -= 1
        elif char == 0x7C and depth == 0:
            raise ValueError(f"anchor {anchor!r}: an alternation at its top level has no key")
    for index, char in enumerate(anchor):
        if char in _SYNTAX:
            key = anchor[: index - 1] if char in _OPTIONAL else anchor[:index]
            break
    else:
        key = anchor
    if not key:
        raise ValueError(f"anchor {anchor!r} does not start with a literal")
    return key


def _group_triggers() -> tuple[tuple[bytes, tuple[bytes, ...]], ...]:
    """Triggers grouped under the first anchor key they contain: a line lacking the key cannot
    contain any trigger of its group, so most triggers are never tested on most lines."""
    groups: dict[bytes, list[bytes]] = {}
    keys = [*(literal_prefix(a) for a in ANCHORS), *TAIL_ANCHORS]
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


_KEYS = tuple(literal_prefix(a) for a in ANCHORS)
# per key: None where the anchor is the key itself, else the regex tried where the key stands
_CHECKS = tuple(None if key == anchor else re.compile(anchor)
                for key, anchor in zip(_KEYS, ANCHORS, strict=True))
# two regex anchors whose keys can start at one place would need both tried there
if any(a != b and a.startswith(b) for a, ca in zip(_KEYS, _CHECKS, strict=True) if ca
       for b, cb in zip(_KEYS, _CHECKS, strict=True) if cb):
    raise ValueError("two regex anchors' keys start alike: make one a literal or merge them")
_AUTOMATON = BytesAhoCorasick(list(_KEYS))
_LONGEST_KEY = max(len(key) for key in _KEYS)
SEARCH_WINDOW = 1 << 16  # bytes searched at once: the matches of one window are held at a time
# A window with more matches than DENSE makes the next one a quarter as long (down to
# SMALLEST_WINDOW), a sparse one makes it twice as long again: where keys crowd a line that the
# scan reads only a window of, the stretch it skips is not searched
DENSE, SMALLEST_WINDOW = 512, 1 << 10


class AnchorHits:
    """The anchors' matches in one buffer, found lazily a window at a time: :meth:`next_from`
    gives the first match at or after a position, so a stretch the scan skips whole (a retry
    loop's copies, the alternating lines of several processes) is not searched again, and the
    matches held are those of one window however many a buffer has."""

    def __init__(self, buf: bytes, limit: int) -> None:
        self.buf, self.limit = buf, limit
        self.view = memoryview(buf)
        # the keys' starts in [window start, window_end), sorted, and for each the regex still to
        # try there (None: a literal anchor, or a regex already tried and matched); a regex is
        # tried only when the scan asks from before its key, never for a stretch it skips
        self.starts: list[int] = []
        self.checks: list[re.Pattern[bytes] | None] = []
        self.window_end = 0
        self.window = SEARCH_WINDOW

    def _search(self, start: int) -> None:
        end = min(start + self.window, self.limit)
        haystack = self.view[start : min(end + _LONGEST_KEY - 1, self.limit)]
        found: dict[int, re.Pattern[bytes] | None] = {}
        for index, at, _ in _AUTOMATON.find_matches_as_indexes(haystack, overlapping=True):
            at += start
            if at < end and found.get(at, True) is not None:  # (a literal there settles it)
                found[at] = _CHECKS[index]
        self.starts = sorted(found)
        self.checks = [found[at] for at in self.starts]
        self.window_end = end
        self.window = (max(SMALLEST_WINDOW, self.window // 4) if len(found) > DENSE
                       else min(SEARCH_WINDOW, self.window * 2))

    def next_from(self, pos: int) -> int:
        """The start of the first anchor match at or after ``pos`` (-1: none before the limit).
        ``pos`` never decreases from one call to the next."""
        while pos < self.limit:
            if pos >= self.window_end:
                self._search(pos)
            starts, checks = self.starts, self.checks
            for index in range(bisect.bisect_left(starts, pos), len(starts)):
                check = checks[index]
                if check is None or check.match(self.buf, starts[index], self.limit):
                    checks[index] = None
                    return starts[index]
            pos = self.window_end
        return -1
