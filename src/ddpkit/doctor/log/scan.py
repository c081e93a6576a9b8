"""Streaming log reader: raw bytes in, :class:`Event` objects out, in constant memory.

The file is read in 1 MiB chunks. A few anchor regexes with literal prefixes (see
:mod:`ddpkit.doctor.log.patterns`; :mod:`ddpkit.doctor.log.anchors` searches them) find the
candidate lines at C speed; ``in`` tests for the trigger literals then pick the patterns for each
candidate line (a run of repeated lines is folded first: :mod:`ddpkit.doctor.log.repeats`); only
lines with a trigger are decoded
(UTF-8, ``errors="replace"``), stripped of launcher/NCCL/glog prefixes and matched against those
patterns. Lines of any length are safe: only a window of ``LINE_WINDOW`` bytes around each anchor
is looked at, so a binary file with no newline costs no more memory than a chunk.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import BinaryIO

from ddpkit.doctor.findings import EVIDENCE_TEXT_LIMIT, clip
from ddpkit.doctor.log.anchor_words import TAIL_KINDS
from ddpkit.doctor.log.anchors import (
    ALL_PATTERNS,
    MAIN_GROUPS,
    TRIGGER_GROUPS,
    AnchorHits,
    patterns_for,
    triggers_in,
)
from ddpkit.doctor.log.line_pattern import LinePattern
from ddpkit.doctor.log.log_bytes import log_chunks
from ddpkit.doctor.log.patterns import (
    FACT_KIND,
    FAILURE_KINDS,
    SOCKET_LIST_HEAD,
    SOCKET_LIST_LINES,
)
from ddpkit.doctor.log.prefixes import COLLECTOR_STAMPS, log_line, parse_prefix
from ddpkit.doctor.log.quiet import QUIET_LINES, read_quiet
from ddpkit.doctor.log.repeats import (
    FOLLOW_LITERALS,
    SOCKET_LIST_HEAD_BYTES,
    STAMP,
    identical_copies,
    repeated_block,
    stamped_copies,
)
from ddpkit.doctor.log.tail import LINE_WINDOW, Kept, keep_buffer, tail_hits
from ddpkit.plain_text import CUT, line_text

CHUNK_BYTES = 1 << 20
WINDOW_BEFORE = 1024  # of which at most this many before the trigger


@dataclass(frozen=True)
class Event:
    """One fact read from one log line."""

    kind: str
    file: str
    line: int
    text: str  # the line (cleaned, clipped) for evidence
    host: str | None  # from an NCCL ``host:pid:tid [dev]`` prefix
    node: str | None  # from a launcher prefix such as ``[node1:0]``
    rank: int | None  # from ``[rank3]:`` / mpirun ``[1,3]`` prefixes
    data: Mapping[str, str]
    repeat: int = 1  # how many identical lines in a row this event stands for (from ``line`` on)
    # the whole line where ``text`` was clipped, for its facts (a CUDA error after a long path);
    # empty otherwise, and in a reading that came over the wire
    whole: str = field(default="", repr=False, compare=False)

    @property
    def origin(self) -> str:
        """Which machine the line came from, as well as the log tells: host, node, else file."""
        return self.host or self.node or f"file:{self.file}"

    def get(self, key: str, default: str = "") -> str:
        return self.data.get(key, default)

    def exception_text(self) -> str:
        """An exception event's ``Type: message`` (its type alone where it was raised without a
        message, or where the message starts on the next line)."""
        message = self.get("message").strip()
        return f"{self.get('type')}: {message}" if message else self.get("type")


_FOLLOW_CACHE: dict[bytes, int] = {}


def _follow_count(raw: bytes) -> int:
    """How many lines after ``raw`` to read whatever they hold (a retry loop's lines repeat:
    the answer is remembered for a bounded number of them)."""
    key = _cache_key(raw)  # (glog's time stamp and pid left out, as for the line cache)
    cached = _FOLLOW_CACHE.get(key)
    if cached is None:
        cached = _follow_count_of(raw)
        if len(_FOLLOW_CACHE) >= _LINE_CACHE_SIZE:
            _FOLLOW_CACHE.clear()
        _FOLLOW_CACHE[key] = cached
    return cached


def _follow_count_of(raw: bytes) -> int:
    count = 0
    for literal, n in FOLLOW_LITERALS:
        if n > count and literal in raw:
            count = n
    # (the line as text: a colour code may follow the head)
    if SOCKET_LIST_HEAD_BYTES in raw and line_text(raw).rstrip().endswith(SOCKET_LIST_HEAD):
        count = max(count, SOCKET_LIST_LINES)
    return count


# --- raw line windows ----------------------------------------------------------------------------


_Hit = tuple[int, bytes, bool, int, int]


class _Windows:
    """Turns buffers of bytes into (line number, bytes, is_follow_line, repeat, period) for
    anchored lines; a line followed by identical copies of itself (a retry loop) is yielded once,
    with the count (period 1); a block of lines that repeats whole (several processes' retries,
    alternating) has each of its lines yielded once, with the count and the block's length
    (the period: the copies of a line are that many lines apart)."""

    def __init__(self) -> None:
        self.line = 1  # number of the line the next buffer starts in
        self.pending_follow = 0

    def scan(self, buf: bytes, limit: int) -> Iterator[_Hit]:
        """Anchored lines (and the lines they ask to follow) starting before ``limit``."""
        find, rfind, count = buf.find, buf.rfind, buf.count
        pos, counted, line = 0, 0, self.line
        hits, first = AnchorHits(buf, limit), True
        while True:
            if first:  # no hit: the lines a line of the last buffer asked to follow, if any
                hit, first = -1, False
            else:
                hit = hits.next_from(pos)
                if hit < 0:
                    break
            if hit >= 0:
                if hit < pos:
                    continue  # inside a line or window already read
                start = rfind(b"\n", 0, hit) + 1
                if start > counted:
                    line += count(b"\n", counted, start)
                    counted = start
                end = find(b"\n", hit, limit)
                end = limit if end < 0 else end
                window_start = max(start, pos, hit - WINDOW_BEFORE)
                window_end = min(end, window_start + LINE_WINDOW)
                raw = buf[window_start:window_end]
                if window_end < end:  # a long line: further anchors along it get own windows
                    yield line, raw, False, 1, 1
                    pos = window_end
                    continue
                pos = end + 1
                follow = _follow_count(raw)
                repeat = 1
                if not follow and window_start == start and end < limit:
                    repeat += identical_copies(buf, buf[start : end + 1], pos, limit)
                    pos += (repeat - 1) * (end + 1 - start)
                    cycle = repeated_block(buf, start, end, limit) if repeat == 1 else None
                    if cycle is not None:
                        block, copies = cycle
                        lines = block.split(b"\n")[:-1]
                        if all(len(one) <= LINE_WINDOW for one in lines):
                            for offset, one in enumerate(lines):
                                yield line + offset, one, False, copies + 1, len(lines)
                            pos = start + (copies + 1) * len(block)
                            continue
                    if repeat == 1:
                        stamped = stamped_copies(buf, start, end, limit)
                        repeat += stamped[0]
                        pos = stamped[1]
                yield line, raw, False, repeat, 1
                if follow > self.pending_follow:
                    self.pending_follow = follow
            while self.pending_follow and pos < limit:
                end = find(b"\n", pos, limit)
                end = limit if end < 0 else end
                if pos > counted:
                    line += count(b"\n", counted, pos)
                    counted = pos
                raw = buf[pos : min(end, pos + LINE_WINDOW)]
                yield line, raw, True, 1, 1
                # a followed line may ask for lines of its own ("Root Cause" right after
                # "ChildFailedError", when a paste drops torchrun's separator lines)
                self.pending_follow = max(self.pending_follow - 1, _follow_count(raw))
                pos = end + 1
        self.line = line + count(b"\n", counted, limit)


def raw_hits(stream: BinaryIO, kept: Kept | None = None) -> Iterator[_Hit]:
    """(line number, bytes, is_follow_line, repeat, period) for every anchored line in
    ``stream``; a run of identical lines (or of identical blocks of lines) is one hit per line
    numbered by its first copy; ``kept`` gets the last buffers."""
    windows = _Windows()
    tail = b""

    def scanned(buf: bytes, limit: int) -> Iterator[_Hit]:
        if kept is not None:
            keep_buffer(kept, buf, limit, windows.line)
        yield from windows.scan(buf, limit)

    stamped: bool | None = None  # every line has a log collector's time stamp (prefixes.py)
    for chunk in log_chunks(stream, CHUNK_BYTES):
        if stamped is None:
            stamped = COLLECTOR_STAMPS.match(chunk) is not None
        buf = tail + chunk if tail else chunk
        cut = buf.rfind(b"\n")
        if cut >= 0:
            if stamped:  # (read past, as if not there: the same lines fold, in one C-level pass)
                lines = COLLECTOR_STAMPS.sub(b"", buf[: cut + 1])
                yield from scanned(lines, len(lines))
            else:
                yield from scanned(buf, cut + 1)
            tail = buf[cut + 1 :]
        else:
            tail = buf
        if len(tail) > 4 * LINE_WINDOW:  # no newline for a long stretch: scan all but an overlap
            keep = len(tail) - LINE_WINDOW
            yield from scanned(tail, keep)
            tail = tail[keep:]
    if tail:
        yield from scanned(tail, len(tail))


# --- events --------------------------------------------------------------------------------------


_Parsed = tuple[tuple[str, str, "str | None", "str | None", "int | None", Mapping[str, str]], ...]
_LINE_CACHE: dict[tuple[bytes, bool], _Parsed] = {}
_LINE_CACHE_SIZE = 2048  # identical lines (retry spam) are parsed once
_FACT_LINES_MAX = 4096
# a quiet-tail event's field: the line's facts were read already, from a fact event of the main
# pass (a stage line the causes also read, Lightning's "Initializing distributed: GLOBAL_RANK: 0,
# MEMBER: 1/2"), and are not read again: a line states its facts once
FACTS_READ = "facts_read"


# digits in a number a pattern reads (a rank, a count, an exit code, a line): more is a crafted
# line's, which int() would refuse past 4300 digits and take quadratic time to convert below that
_LONGEST_NUMBER = 20


def crafted_number(values: Iterable[str]) -> bool:
    """Whether an event's ``values`` hold a number no program prints (the rules convert its
    numbers with int(): such an event is not read)."""
    return any(len(v) > _LONGEST_NUMBER and v.lstrip("-").isdigit() for v in values)


def _parse_line(raw: bytes, follow: bool, tail: bool = False) -> _Parsed:
    """(kind, shown text, host, node, rank, fields) for each event in one line, in line order."""
    candidates = ALL_PATTERNS if follow else patterns_for(
        triggers_in(raw, TRIGGER_GROUPS if tail else MAIN_GROUPS))
    if not candidates:
        return ()
    text = log_line(raw)
    found: list[tuple[int, int, LinePattern, dict[str, str]]] = []
    for order, pattern in enumerate(candidates):
        if not follow and not pattern.triggers:
            continue
        if pattern.skip_if and any(s in text for s in pattern.skip_if):
            continue
        if pattern.fallback and found:
            continue
        if pattern.multi:
            matches = list(pattern.regex.finditer(text))
        else:
            single = pattern.regex.search(text)
            matches = [single] if single else []
        for match in matches:
            data = {k: v for k, v in match.groupdict().items() if v is not None}
            if crafted_number(data.values()):
                continue  # (a number no program prints: not that program's line, no int of it)
            for extra in pattern.extras:
                more = extra.search(text)
                if more:
                    for key, value in more.groupdict().items():
                        if value is not None and key not in data:
                            data[key] = value
            data.update(pattern.fixed)
            found.append((match.start(), order, pattern, data))
        if matches and pattern.claims:
            break
    if not found:
        return ()
    host, node, rank = parse_prefix(text)
    shown = clip(text.strip())
    found.sort(key=lambda item: (item[0], item[1]))
    return tuple((p.kind, shown, host, node, rank, d) for _, _, p, d in found)


# glog's time stamp and process id ("[W1204 09:50:12.118000 3107 socket.cpp:663]", after any
# "[rank3]:" tags): every line of a c10d or torchelastic log differs by them, and no pattern
# reads them. The line cache is asked with them left out (the level and the file stay).


def _cache_key(raw: bytes) -> bytes:
    stamp = STAMP.match(raw)
    return raw if stamp is None else stamp.group(1) + raw[stamp.end() :]


def _events_in_line(name: str, number: int, raw: bytes, follow: bool, repeat: int) -> list[Event]:
    line_key = _cache_key(raw)
    key = (line_key, follow)
    parsed = _LINE_CACHE.get(key)
    if parsed is None:
        parsed = _parse_line(raw, follow)
        if len(_LINE_CACHE) >= _LINE_CACHE_SIZE:
            _LINE_CACHE.clear()
        _LINE_CACHE[key] = parsed
    elif line_key is not raw and parsed:  # the same message at another time: its own text
        text = log_line(raw)
        host, node, rank = parse_prefix(text)
        shown = clip(text.strip())
        parsed = tuple((kind, shown, host, node, rank, data)
                       for kind, _shown, _host, _node, _rank, data in parsed)
    whole = _whole(raw, parsed[0][1]) if parsed else ""
    return [Event(kind, name, number, shown, host, node, rank, data, repeat, whole)
            for kind, shown, host, node, rank, data in parsed]


def _whole(raw: bytes, shown: str) -> str:
    """The whole line, where ``shown`` is it clipped; empty otherwise."""
    clipped = len(shown) == EVIDENCE_TEXT_LIMIT and shown.endswith(CUT)
    return log_line(raw).strip() if clipped else ""


def scan(stream: BinaryIO, name: str, quiet: bool = True) -> Iterator[Event]:
    """Every event in ``stream`` (opened in binary mode), in file order; ``name`` labels evidence.

    Lines without any prefix (a traceback, NCCL's ``Last error:`` text) are credited to the one
    host the file has shown so far; in a file mixing several hosts they stay anonymous. A log
    that showed no failure and no end has its last lines read whole (:mod:`quiet`), unless
    ``quiet`` is false (a head read apart from its tail: its last lines are not the log's).
    """
    hosts: set[str] = set()
    kept: Kept = []
    seen: deque[int] = deque(maxlen=QUIET_LINES)  # the lines events came from, the last ones
    count, failed = 0, False
    fact_lines: set[int] = set()  # the main pass's fact lines, which the tail pass may read again
    facts_read: deque[int] = deque(maxlen=QUIET_LINES)  # the last lines whose facts were read
    for number, raw, follow, repeat, period in raw_hits(stream, kept):
        for event in _events_in_line(name, number, raw, follow, repeat):
            if event.kind in TAIL_KINDS:
                continue  # the tail pass's (below), wherever the line also had a main anchor
            if event.host:
                if len(hosts) < 2:
                    hosts.add(event.host)
            elif event.node is None and len(hosts) == 1:
                event = replace(event, host=next(iter(hosts)))
            if event.kind == FACT_KIND:  # read for its facts only: the quiet tail reads it too
                if len(fact_lines) < _FACT_LINES_MAX:
                    fact_lines.add(number)
                facts_read.extend(_last_copies(number, repeat, period))
                yield event
                continue
            count += 1
            failed = failed or event.kind in FAILURE_KINDS
            if not failed:  # the quiet tail reads only a log without a failure
                seen.extend(_last_copies(number, repeat, period))
            yield event
    ended = False
    for number, raw in tail_hits(kept):  # the end of the log: after the events above
        for kind, shown, host, node, rank, data in _parse_line(raw, False, tail=True):
            if kind in TAIL_KINDS:
                count += 1
                ended = True
                seen.append(number)
                yield Event(kind, name, number, shown, host, node, rank, data, 1,
                            _whole(raw, shown))
            elif kind == FACT_KIND and number not in fact_lines:  # (a death's report)
                yield Event(kind, name, number, shown, host, node, rank, data, 1,
                            _whole(raw, shown))
    if failed or ended or not quiet:
        return
    read_before = set(facts_read)
    for kind, number, shown, data in read_quiet(kept, set(seen), count, _line_count(kept)):
        host, node, rank = parse_prefix(shown) if shown else (None, None, None)
        if number in read_before:  # (its facts were read once, from the main pass's event)
            data = {**data, FACTS_READ: "1"}
        yield Event(kind, name, number, shown, host, node, rank, data)


def _last_copies(number: int, repeat: int, period: int) -> range:
    """The line numbers of the last copies (as many as the quiet tail reads) of a line that
    ``repeat`` copies, every ``period`` lines from line ``number``, fold into one hit."""
    return range(number + (repeat - min(repeat, QUIET_LINES)) * period, number + repeat * period,
                 period)


def _line_count(kept: Kept) -> int:
    """How many lines the log has (the last kept buffer ends it)."""
    if not kept:
        return 0
    buf, limit, first_line = kept[-1]
    return first_line + buf.count(b"\n", 0, limit) - (buf[limit - 1 : limit] == b"\n")
