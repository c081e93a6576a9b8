"""nccl-tests' bandwidth definitions and size sweeps. Stdlib only: worker programs import this.

Definitions (nccl-tests, ``doc/PERFORMANCE.md`` and its ``*GetBw`` functions):

* ``size`` of one measurement is the larger of the send and receive buffers of one rank, in bytes:
  all_reduce and broadcast use the buffer itself, all_gather the gathered (output) buffer,
  reduce_scatter the (input) buffer that gets scattered, all_to_all the per-rank buffer.
* ``algbw = size / time`` (bytes per second; nccl-tests prints it in GB/s = 1e9 B/s).
* ``busbw = algbw * factor(op, n)`` where ``n`` is the number of ranks: all_reduce ``2(n-1)/n``;
  all_gather, reduce_scatter, all_to_all ``(n-1)/n``; broadcast, reduce, send/recv ``1``. busbw is
  what each rank's link actually carried per second, so it is the number to compare with a link rate.

Errors here are ``ValueError`` with a readable message: this module must not import ddpkit.errors
(worker programs import it); :mod:`ddpkit.bench.units` turns them into ddpkit errors.
"""

from __future__ import annotations

import re

COLLECTIVES: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "all_to_all",
    "reduce",
    "send_recv",
)

# Collectives whose buffer is split into one chunk per rank (count must divide by n).
CHUNKED: frozenset[str] = frozenset({"all_gather", "reduce_scatter", "all_to_all"})

GB = 1e9  # nccl-tests' GB/s is 1e9 bytes per second


def busbw_factor(op: str, ranks: int) -> float:
    """nccl-tests' bus-bandwidth factor for collective ``op`` over ``ranks`` ranks."""
    if ranks < 1:
        raise ValueError(f"ranks must be >= 1, got {ranks}")
    if op == "all_reduce":
        return 2.0 * (ranks - 1) / ranks
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (ranks - 1) / ranks
    if op in ("broadcast", "reduce", "send_recv"):
        return 1.0
    raise ValueError(f"unknown collective {op!r}; known: {', '.join(COLLECTIVES)}")


def algbw(size_bytes: float, seconds: float) -> float:
    """Algorithm bandwidth in bytes per second: the buffer size over the time of one operation."""
    if seconds <= 0:
        raise ValueError(f"time must be > 0 s, got {seconds}")
    return size_bytes / seconds


def busbw(op: str, size_bytes: float, seconds: float, ranks: int) -> float:
    """Bus bandwidth in bytes per second: ``algbw * busbw_factor(op, ranks)``."""
    return algbw(size_bytes, seconds) * busbw_factor(op, ranks)


def all_reduce_seconds(size_bytes: float, busbw_bytes_per_s: float, ranks: int) -> float:
    """Time of an all_reduce of ``size_bytes`` given a bus bandwidth (the inverse of :func:`busbw`)."""
    if busbw_bytes_per_s <= 0:
        raise ValueError(f"bandwidth must be > 0, got {busbw_bytes_per_s}")
    return size_bytes * busbw_factor("all_reduce", ranks) / busbw_bytes_per_s


def element_count(op: str, size_bytes: int, element_size: int, ranks: int) -> int:
    """Elements in the measured buffer for ``size_bytes``, rounded down like nccl-tests does.

    Chunked collectives need a count divisible by ``ranks``; the result may be 0 for tiny sizes
    (the caller skips those).
    """
    if element_size < 1:
        raise ValueError(f"element size must be >= 1 byte, got {element_size}")
    count = size_bytes // element_size
    if op in CHUNKED:
        count = (count // ranks) * ranks
    return count


_SWEEP_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_SWEEP_MULTIPLIER = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_sweep_size(text: str) -> int:
    """A ``-b``/``-e`` size as nccl-tests reads it: an integer with an optional binary suffix.

    ``1K`` = 1024 bytes, ``64M`` = 64 MiB, ``1G`` = 1 GiB; ``KiB``/``MiB``/``GiB`` mean the same and
    a plain number is bytes. SI forms (``1KB`` = 1000) are :func:`ddpkit.bench.units.parse_size`'s
    business; this parser rejects them so a sweep never mixes conventions.
    """
    match = _SWEEP_SIZE.match(text)
    unit = (match.group(3) or "").lower() if match else ""
    prefix = match.group(2) if match else ""
    # "1KB" is SI (1000) elsewhere, so refuse it here; "8iB" names no prefix at all.
    if match is None or (unit == "b" and prefix) or (unit == "ib" and not prefix):
        raise ValueError(
            f"{text!r} is not a sweep size: use bytes with an optional binary suffix, "
            "like 8, 1K, 64M, 1G or 64MiB (K = 1024)"
        )
    value = int(match.group(1)) * _SWEEP_MULTIPLIER[match.group(2).lower()]
    if value <= 0:
        raise ValueError(f"sweep size must be > 0 bytes, got {text!r}")
    return value


MAX_SWEEP_POINTS = 256


def sweep_sizes(begin: int, end: int, factor: int = 2, step: int | None = None) -> list[int]:
    """Sizes from ``begin`` to ``end`` bytes inclusive, like nccl-tests ``-b -e -f`` (or ``-i``).

    ``factor`` multiplies each size; ``step`` (if given) adds a fixed number of bytes instead.
    """
    if begin <= 0:
        raise ValueError(f"begin size must be > 0 bytes, got {begin}")
    if end < begin:
        raise ValueError(f"end size {end} is smaller than begin size {begin}")
    if step is not None:
        if step <= 0:
            raise ValueError(f"step must be > 0 bytes, got {step}")
        points = (end - begin) // step + 1
    else:
        if factor < 2:
            raise ValueError(f"factor must be an integer >= 2, got {factor}")
        points = 1
        size = begin
        while size * factor <= end:
            size *= factor
            points += 1
    if points > MAX_SWEEP_POINTS:
        raise ValueError(f"the sweep has {points} sizes; at most {MAX_SWEEP_POINTS} are allowed")
    if step is not None:
        return [begin + i * step for i in range(points)]
    return [begin * factor**i for i in range(points)]
