"""Plain values from an untrusted dump, shown within a budget (pure).

A dump refers to one value as often as it likes: 465 bytes hold a list of lists that the same
inner list fills many times, nested, which ``str()`` would expand to gigabytes. A string field can
be hundreds of megabytes, a list a million levels deep (``str()`` then raises RecursionError), an
integer a million digits (``str()`` raises ValueError past 4300, after quadratic work). So nothing
from a dump is turned into text with ``str()``: :func:`text` walks the value itself, expanding
every shared reference as ``str()`` would, and stops at ``limit`` characters of output, at
``MAX_DEPTH`` levels and at ``MAX_ITEMS`` items per container; a long string is cut before it is
looked at, an integer over ``MAX_INT_BITS`` is shown by its size, and control characters are
removed. The cost is bounded by ``limit`` and the caps, whatever the value.
"""

from __future__ import annotations

from itertools import islice

from ddpkit.plain_text import CUT, shown

MAX_DEPTH = 8
MAX_ITEMS = 64  # of one list, tuple or dict shown
MAX_INT_BITS = 128


def small_int(value: object) -> int | None:
    """``value`` when it is an int (not a bool) that fits ``MAX_INT_BITS``, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and \
            value.bit_length() <= MAX_INT_BITS:
        return value
    return None


def text(value: object, limit: int) -> str:
    """``value`` as ``str()`` would show it (strings bare at the top, quoted inside containers),
    bounded as the module says; a cut is marked with an ellipsis."""
    out: list[str] = []
    room = [limit + 1]  # characters still allowed (one more, to know that a cut happened)

    def put(piece: str) -> bool:
        if room[0] <= 0:
            return False
        piece = piece[:room[0]]
        out.append(piece)
        room[0] -= len(piece)
        return room[0] > 0

    def walk(item: object, depth: int, top: bool) -> bool:
        if isinstance(item, str):
            body = shown(item, room[0])
            return put(body if top else "'" + body + "'")
        if isinstance(item, (bytes, bytearray)):
            return put(shown(repr(bytes(item[:room[0]])), room[0]))
        if isinstance(item, bool) or item is None or isinstance(item, float):
            return put(repr(item))
        if isinstance(item, int):
            bits = item.bit_length()
            return put(str(item) if bits <= MAX_INT_BITS else f"<an integer of {bits} bits>")
        if isinstance(item, (list, tuple, dict)):
            opening, closing = ("{", "}") if isinstance(item, dict) else \
                ("(", ")") if isinstance(item, tuple) else ("[", "]")
            if depth >= MAX_DEPTH:
                return put(f"{opening}{CUT}{closing}")
            if not put(opening):
                return False
            pairs = list(islice(item.items(), MAX_ITEMS)) if isinstance(item, dict) else None
            members = pairs if pairs is not None else list(item[:MAX_ITEMS])
            for number, member in enumerate(members):
                if number and not put(", "):
                    return False
                if pairs is not None:
                    key, member = member
                    if not walk(key, depth + 1, False) or not put(": "):
                        return False
                if not walk(member, depth + 1, False):
                    return False
            if len(item) > MAX_ITEMS and not put(f", {CUT}"):
                return False
            return put(closing)
        return put(f"<{type(item).__name__}>")

    walk(value, 0, True)
    joined = "".join(out)
    return joined if len(joined) <= limit else joined[:max(0, limit - 1)] + CUT
