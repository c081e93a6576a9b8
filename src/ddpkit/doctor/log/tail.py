"""The tail pass of the log scanner: lines near the end of a log that hold a TAIL_ANCHORS literal
(where a run ends: its end markers, the shell's ``Killed``), found in the buffers the main pass
kept (:func:`ddpkit.doctor.log.scan.raw_hits`)."""

from __future__ import annotations

from collections.abc import Iterator

from ddpkit.doctor.log.anchor_words import TAIL_ANCHORS, TAIL_BYTES

LINE_WINDOW = 8192  # bytes of a line examined per trigger hit
Kept = list[tuple[bytes, int, int]]  # (buffer, limit, number of its first line)
MAX_LINES = 4096  # lines read per kept buffer (a flood of one marker says no more than a few)


def keep_buffer(kept: Kept, buf: bytes, limit: int, first_line: int) -> None:
    """Keep the buffer the main pass scans, and the ones before it while they are within
    TAIL_BYTES of the end."""
    kept.append((buf, limit, first_line))
    while sum(item[1] for item in kept[1:]) >= TAIL_BYTES:
        del kept[0]


def tail_hits(kept: Kept) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) for the lines of the kept buffers that hold a TAIL_ANCHORS literal."""
    for buf, limit, first_line in kept:
        starts: set[int] = set()
        for literal in TAIL_ANCHORS:
            hit = buf.find(literal, 0, limit)
            while hit >= 0 and len(starts) < MAX_LINES:
                starts.add(buf.rfind(b"\n", 0, hit) + 1)
                newline = buf.find(b"\n", hit, limit)
                hit = -1 if newline < 0 else buf.find(literal, newline + 1, limit)
        counted, line = 0, first_line
        for start in sorted(starts):
            line += buf.count(b"\n", counted, start)
            counted = start
            end = buf.find(b"\n", start, limit)
            end = limit if end < 0 else end
            yield line, buf[start : min(end, start + LINE_WINDOW)]
