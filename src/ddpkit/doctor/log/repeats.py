"""Folding repeated lines as the scan reads them: a retry loop's identical copies, the same line again
but for glog's time stamp and process id (c10d's and torchelastic's retries from any number of
processes), and a block of several processes' lines that repeats whole. Each is found with a few
C-level comparisons or one regular expression, never a Python step per copy."""

from __future__ import annotations

import re

from ddpkit.doctor.log.patterns import FOLLOW, SOCKET_LIST_HEAD
from ddpkit.launch.torchrun.torch_log import MONTH_DAY_TIME

FOLLOW_LITERALS = tuple((k.encode(), n) for k, n in FOLLOW.items())
SOCKET_LIST_HEAD_BYTES = SOCKET_LIST_HEAD.encode()
# glog's and c10's head of a line (after any launcher prefixes): level, month-day, time, thread id
STAMP_TIME = MONTH_DAY_TIME.encode() + rb" +\d+ "
STAMP = re.compile(rb"^((?:\s*\[[^\]\s]*\]:?)*\s*\[?[IWEF])" + STAMP_TIME)
STAMP_AT = re.compile(STAMP.pattern[1:])  # the same at a position in a buffer ("^" is not)


REPEAT_BLOCK_MAX = 4096  # lines compared at once when skipping a run of identical lines


def identical_copies(buf: bytes, line: bytes, pos: int, limit: int) -> int:
    """How many copies of ``line`` (newline included) follow at ``pos``, before ``limit``: compared
    in blocks that double while they match, so a retry loop's million copies cost a few dozen
    C-level comparisons, not a million Python steps."""
    count, block = 0, 1
    while block:
        run = line * block
        if buf.startswith(run, pos, limit):
            pos += len(run)
            count += block
            block = min(block * 2, REPEAT_BLOCK_MAX)
        else:
            block //= 2
    return count


_RUN_CACHE: dict[bytes, re.Pattern[bytes]] = {}


def stamped_copies(buf: bytes, start: int, end: int, limit: int) -> tuple[int, int]:
    """How many lines after the one at ``start..end`` say the same but for glog's time stamp and
    process id (c10d's and torchelastic's retries, from any number of processes), and where
    the line after them starts: no two such lines are alike, so only this folds them (one
    regular expression made for the line runs over the copies, in C)."""
    first = STAMP_AT.match(buf, start, end)
    if first is None:
        return 0, end + 1
    key = buf[start : first.end(1)] + b"\0" + buf[first.end() : end + 1]
    run = _RUN_CACHE.get(key)
    if run is None:
        if len(_RUN_CACHE) >= 64:
            _RUN_CACHE.clear()
        run = _RUN_CACHE[key] = re.compile(
            b"(?:" + re.escape(buf[start : first.end(1)]) + STAMP_TIME
            + re.escape(buf[first.end() : end + 1]) + b")*")
    match = run.match(buf, end + 1, limit)
    stop = match.end() if match is not None else end + 1
    return buf.count(b"\n", end + 1, stop), stop


CYCLE_LINES = 16  # the most processes whose lines, alternating, are folded as one cycle


def repeated_block(buf: bytes, start: int, end: int, limit: int) -> tuple[bytes, int] | None:
    """The block of lines from ``start`` that repeats whole right after itself, and how many
    more copies follow (before ``limit``): several processes' retries alternating line by
    line. None when the line at ``start..end`` does not come back within ``CYCLE_LINES``
    lines, or the block holds a line that asks for lines after it, or a long line."""
    line = buf[start : end + 1]
    horizon = min(limit, end + 1 + (CYCLE_LINES + 1) * max(len(line), 160))
    again = buf.find(line, end + 1, horizon)
    while again > 0 and buf[again - 1] != 10:  # a copy that starts a line
        again = buf.find(line, again + 1, horizon)
    if again < 0:
        return None
    block = buf[start:again]
    lines = block.count(b"\n")
    if (not 2 <= lines <= CYCLE_LINES or any(k in block for k, _n in FOLLOW_LITERALS)
            or SOCKET_LIST_HEAD_BYTES in block):
        return None
    copies = identical_copies(buf, block, again, limit)
    return (block, copies) if copies else None
