"""Parse and print sizes, parameter counts, rates and durations, with one set of unit conventions.

Conventions (also in docs/plan.md):

* **Sizes are bytes.** A bare number is bytes. ``K M G T`` without ``B`` are binary (``1K`` = 1024, as
  nccl-tests' ``-b``/``-e``); ``KiB MiB GiB TiB`` are binary; ``kB KB MB GB TB`` are SI (``14GB`` =
  14e9 bytes). A lowercase ``b`` means bits and is refused in a size.
* **Parameter counts are SI**: ``K``/``k`` 1e3, ``M`` 1e6, ``B``/``G`` 1e9 ("billion"), ``T`` 1e12;
  scientific notation (``25e6``) and underscores (``25_000_000``) work.
* **Rates must say bits or bytes**: ``b``/``bit``/``bits`` are bits, ``B``/``byte``/``bytes`` are bytes
  (the letter's case decides; prefixes are case-insensitive). Prefixes are SI (``25Gbit`` =
  25e9 bit/s, the way links are sold); ``Ki Mi Gi Ti`` are binary. ``/s`` or ``ps`` is optional.
  A rate with no unit is refused: the factor of 8 between bits and bytes is the mistake to avoid.
  Every rate is returned in **bytes per second**.
* **Durations**: bare numbers are seconds; ``s``, ``ms``, ``us``/``µs``, ``ns``, ``min``.
"""

from __future__ import annotations

import math
import re

from ddpkit.errors import UsageError
from ddpkit.i18n import _

_NUMBER = re.compile(r"^\s*(\d[\d_]*(?:\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*")
_SI = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
_IEC = {"k": 2.0**10, "m": 2.0**20, "g": 2.0**30, "t": 2.0**40, "p": 2.0**50}


def _split_number(text: str) -> tuple[float, str] | None:
    match = _NUMBER.match(text)
    if match is None:
        return None
    try:
        value = float(match.group(1) + (match.group(2) or ""))
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return value, text[match.end() :].strip()


def parse_size(text: str, *, flag: str = "size") -> int:
    """Bytes from ``4096``, ``1K`` (1024), ``64MiB``, ``14GB`` (14e9). See the module conventions."""
    hint = _("give {flag} in bytes: 4096, 1K or 64MiB (binary), 14GB (SI, 1e9)", flag=flag)
    split = _split_number(text)
    if split is None:
        raise UsageError("bad-size", _("{flag}: {text!r} is not a size", flag=flag, text=text),
                         hint)
    value, rest = split
    match = re.fullmatch(r"([kKmMgGtTpP]?)(i?)(B|b|bytes?|bits?)?", rest)
    if match is None:
        raise UsageError("bad-size", _("{flag}: unknown unit {rest!r} in {text!r}", flag=flag,
                                       rest=rest, text=text), hint)
    prefix, binary, unit = match.group(1).lower(), match.group(2), match.group(3) or ""
    if unit in ("b", "bit", "bits"):
        raise UsageError(
            "bad-size",
            _("{flag}: {text!r} is in bits (lowercase b); sizes are bytes", flag=flag, text=text),
            _("write bytes with a capital B: {si} (SI) or {binary} (binary)",
              si=format(value, "g") + match.group(1).upper() + "B",
              binary=format(value, "g") + match.group(1).upper() + "iB")
            if prefix else _("write bytes with a capital B: {size}",
                             size=format(value, "g") + "B"),
        )
    if binary and not prefix:
        raise UsageError("bad-size", _("{flag}: {text!r} has 'i' without a prefix", flag=flag,
                                       text=text), hint)
    if not prefix:
        multiplier = 1.0
    elif binary or not unit:
        multiplier = _IEC[prefix]  # 1K = 1024 as in nccl-tests; 1KiB = 1024
    else:
        multiplier = _SI[prefix]  # 1KB = 1000
    size = round(value * multiplier)
    if size <= 0:
        raise UsageError("bad-size", _("{flag}: {text!r} must be more than 0 bytes", flag=flag,
                                       text=text), hint)
    return size


def parse_count(text: str, *, flag: str = "--params") -> int:
    """A parameter count from ``7B``, ``125M``, ``350k``, ``25e6`` or ``25_000_000`` (all SI)."""
    hint = _("give {flag} as a count: 7B, 1.3B, 125M, 350K or 25e6", flag=flag)
    split = _split_number(text)
    if split is None:
        raise UsageError("bad-count", _("{flag}: {text!r} is not a count", flag=flag, text=text),
                         hint)
    value, rest = split
    multipliers = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
    if rest.lower() not in multipliers:
        raise UsageError("bad-count", _("{flag}: unknown suffix {rest!r} in {text!r}", flag=flag,
                                        rest=rest, text=text), hint)
    count = round(value * multipliers[rest.lower()])
    if count < 1:
        raise UsageError("bad-count", _("{flag}: {text!r} must be at least 1", flag=flag,
                                        text=text), hint)
    return count


def parse_rate(text: str, *, flag: str = "rate") -> float:
    """Bytes per second from ``25Gbit``, ``1gbit``, ``10Gb/s``, ``10Gbps``, ``300GB/s``, ``1GiB/s``."""
    hint = _("give {flag} with bits or bytes spelled out: 25Gbit, 10Gb/s (bits) or 300GB/s (bytes)",
             flag=flag)
    split = _split_number(text)
    if split is None:
        raise UsageError("bad-rate", _("{flag}: {text!r} is not a rate", flag=flag, text=text),
                         hint)
    value, rest = split
    for per_second in ("/s", "/sec", "ps"):
        if rest.lower().endswith(per_second):
            rest = rest[: -len(per_second)]
            break
    lowered = rest.lower()
    if lowered.endswith(("bits", "bit")):
        bits, prefix = True, rest[: -(4 if lowered.endswith("bits") else 3)]
    elif lowered.endswith(("bytes", "byte")):
        bits, prefix = False, rest[: -(5 if lowered.endswith("bytes") else 4)]
    elif rest.endswith("b"):
        bits, prefix = True, rest[:-1]
    elif rest.endswith("B"):
        bits, prefix = False, rest[:-1]
    else:
        raise UsageError(
            "bad-rate",
            _("{flag}: {text!r} does not say whether it is bits or bytes per second", flag=flag,
              text=text),
            hint,
        )
    prefix = prefix.lower()
    if prefix.endswith("i") and prefix[:-1] in _IEC:
        multiplier = _IEC[prefix[:-1]]
    elif prefix in _SI:
        multiplier = _SI[prefix]
    else:
        raise UsageError("bad-rate", _("{flag}: unknown prefix {prefix!r} in {text!r}", flag=flag,
                                       prefix=prefix, text=text), hint)
    rate = value * multiplier / (8.0 if bits else 1.0)
    if rate <= 0:
        raise UsageError("bad-rate", _("{flag}: {text!r} must be more than 0", flag=flag,
                                       text=text), hint)
    return rate


def parse_duration(text: str, *, flag: str = "duration") -> float:
    """Seconds from ``0.8s``, ``800ms``, ``250us``, ``2min`` or a bare number of seconds."""
    hint = _("give {flag} as a time: 0.8s, 800ms, 250us (a bare number is seconds)", flag=flag)
    split = _split_number(text)
    if split is None:
        raise UsageError("bad-duration", _("{flag}: {text!r} is not a duration", flag=flag,
                                           text=text), hint)
    value, rest = split
    scale = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9,
             "min": 60.0}
    if rest.lower() not in scale:
        raise UsageError("bad-duration", _("{flag}: unknown unit {rest!r} in {text!r}", flag=flag,
                                           rest=rest, text=text), hint)
    seconds = value * scale[rest.lower()]
    if seconds <= 0:
        raise UsageError("bad-duration", _("{flag}: {text!r} must be more than 0", flag=flag,
                                           text=text), hint)
    return seconds


def _scaled(value: float, steps: list[tuple[float, str]]) -> str:
    if value == 0:
        return "0" + next((suffix for scale, suffix in steps if scale == 1.0), steps[-1][1])
    for scale, suffix in steps:
        if abs(value) >= scale:
            scaled = value / scale
            digits = 2 if abs(scaled) < 10 else 1 if abs(scaled) < 100 else 0
            return f"{scaled:.{digits}f}{suffix}"
    scale, suffix = steps[-1]
    return f"{value / scale:.2f}{suffix}"


def format_bytes(size: float) -> str:
    """``84.0 MB``: SI bytes, three significant digits."""
    return _scaled(size, [(1e12, " TB"), (1e9, " GB"), (1e6, " MB"), (1e3, " kB"), (1.0, " B")])


def format_rate(bytes_per_second: float) -> str:
    """``25.0 Gbit/s (3.12 GB/s)``: bits the way links are sold, bytes the way bench prints busbw."""
    bits = _scaled(bytes_per_second * 8,
                   [(1e12, " Tbit/s"), (1e9, " Gbit/s"), (1e6, " Mbit/s"), (1e3, " kbit/s"),
                    (1.0, " bit/s")])
    return f"{bits} ({format_bytes(bytes_per_second)}/s)"


def format_seconds(seconds: float) -> str:
    """``291 ms``, ``1.23 s``, ``850 µs``."""
    return _scaled(seconds, [(1.0, " s"), (1e-3, " ms"), (1e-6, " µs"), (1e-9, " ns")])


def format_count(count: float) -> str:
    """``7.00B``, ``21.0M``, ``350K``."""
    return _scaled(count, [(1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K"), (1.0, "")])
