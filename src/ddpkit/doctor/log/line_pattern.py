"""One line pattern of the scan's table (doctor/log/patterns.py): which lines become which
events."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ddpkit.doctor.log.kinds import EventKind


@dataclass(frozen=True)
class LinePattern:
    kind: EventKind
    triggers: tuple[str, ...]
    regex: re.Pattern[str]
    extras: tuple[re.Pattern[str], ...] = ()  # searched separately; fill groups the regex lacks
    fixed: tuple[tuple[str, str], ...] = ()  # constant fields added to the event
    skip_if: tuple[str, ...] = ()  # substrings that make the line not this pattern's
    claims: bool = False
    multi: bool = False
    fallback: bool = False  # read only when no earlier pattern matched the line


def pattern(
    kind: EventKind,
    triggers: tuple[str, ...],
    regex: str,
    *extras: str,
    fixed: tuple[tuple[str, str], ...] = (),
    skip_if: tuple[str, ...] = (),
    claims: bool = False,
    multi: bool = False,
) -> LinePattern:
    return LinePattern(
        kind, triggers, re.compile(regex), tuple(re.compile(e) for e in extras), fixed, skip_if,
        claims, multi,
    )


def fallback_pattern(kind: EventKind, triggers: tuple[str, ...], regex: str, *,
        skip_if: tuple[str, ...] = ()) -> LinePattern:
    """A fallback pattern: it reads a line only when no pattern before it matched."""
    return LinePattern(kind, triggers, re.compile(regex), skip_if=skip_if, fallback=True)
