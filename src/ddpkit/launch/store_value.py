"""Reading one JSON value out of a store that anyone on the network can write to.

torch's c10d ``TCPStore`` has no authentication, so every value a ddpkit node reads from one (the
join store, torchrun's rendezvous store, the cluster doctor's store) may have been written by
someone else. :func:`parse_json_dict` is the one place such bytes become a Python value: the size,
the nesting depth, the encoding and the type are checked before (and while) parsing, and every way
the bytes can fail is the one exception :class:`NotOurs`, which callers treat as "this value is
not ours: ignore it and warn once", never as a crash. (Python's own ``json`` parser recurses per
nesting level: a value of 200,000 ``[`` raises RecursionError, which no caller expected.)
"""

from __future__ import annotations

import json
import re
from typing import Any

from ddpkit.i18n import _

MAX_VALUE_BYTES = 1 << 20  # no value ddpkit writes comes near this; anything larger is refused
MAX_DEPTH = 16  # ddpkit's values nest at most 8 deep (an outcome's stack reports)

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')  # a JSON string (escapes included), never nested
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class NotOurs(ValueError):
    """The bytes are not a value ddpkit wrote: the message says why, in a few words."""

    @property
    def why(self) -> str:
        """The reason as raised (a translatable text; ``str()`` of the error is plain English)."""
        return self.args[0] if self.args and isinstance(self.args[0], str) else str(self)


def nesting_within(raw: bytes, most: int) -> bool:
    """True when the JSON text ``raw`` nests no deeper than about ``most`` levels (it may count up
    to twice the real depth, never less), found without parsing and without recursion: strings
    are dropped, then innermost ``[]``/``{}`` pairs removed, ``most`` rounds of C-speed replaces."""
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    for _round in range(most):
        if not brackets:
            return True
        brackets = brackets.replace(b"[]", b"").replace(b"{}", b"")
    return not brackets


def _no_constant(name: str) -> Any:
    raise NotOurs(_("it holds {name}, which ddpkit never writes", name=name))


def parse_json_dict(raw: object, *, most_bytes: int = MAX_VALUE_BYTES,
                 most_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """The JSON object in ``raw`` (bytes from a store); NotOurs when it is not bytes, is over
    ``most_bytes``, not UTF-8, nested deeper than ``most_depth``, not JSON (NaN and Infinity
    included) or not an object. Never raises anything else."""
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise NotOurs(_("it is a {kind}, not bytes", kind=type(raw).__name__))
    data = bytes(raw)
    if len(data) > most_bytes:
        raise NotOurs(_("it is {size} bytes, over ddpkit's {most}", size=len(data),
                        most=most_bytes))
    if not nesting_within(data, most_depth):
        raise NotOurs(_("it nests deeper than ddpkit's {most} levels (or is not JSON)",
                        most=most_depth))
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except NotOurs:
        raise
    except (ValueError, RecursionError, MemoryError) as exc:
        raise NotOurs(_("it is not JSON ({kind})", kind=type(exc).__name__)) from None
    if not isinstance(value, dict):
        raise NotOurs(_("it is a JSON {kind}, not an object", kind=type(value).__name__))
    return value


def text_field(value: dict[str, Any], name: str, default: str = "", *, most: int = 256) -> str:
    """``value[name]`` when it is a string (cut to ``most`` characters), else ``default``: for the
    fields a node shows or compares, so a wrong type is never an exception later."""
    found = value.get(name, default)
    return found[:most] if isinstance(found, str) else default
