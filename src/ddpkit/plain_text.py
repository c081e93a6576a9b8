"""Text from files or processes other people control, made safe to print on a terminal (pure).

Log lines, frame names read from another process, values in a dump: any of them can carry escape
sequences that retitle the window, move the cursor or hide what follows. :func:`strip_controls`
is the one place that removes them; :func:`shown` also bounds the length first, so a field of
hundreds of megabytes costs no more than the part that is shown.
"""

from __future__ import annotations

import re

# Every terminal control sequence: OSC (window titles, hyperlinks, clipboard writes) up to BEL or ST,
# CSI (colours, cursor moves), other two-byte escapes, any remaining C0/C1 control character but the
# tab, the bidirectional overrides and isolates that make a line read other than it is stored, and
# the byte-order mark (U+FEFF) that Windows editors and PowerShell write before a file's first
# line, which no line of a program starts with.
_SEQUENCES = (r"\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|\x1b\[[0-?]*[ -/]*[@-~]"
              r"|\x9b[0-?]*[ -/]*[@-~]|\x1b[ -/]*[0-~]|[\u202a-\u202e\u2066-\u2069\ufeff]")
_CONTROL = re.compile(_SEQUENCES + r"|[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_CONTROL_BUT_NEWLINE = re.compile(_SEQUENCES + r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
CUT = "…"
CONTROL_SEQUENCE = _CONTROL  # also what takes no columns on a terminal (ddpkit.cli.output.width)


def strip_controls(text: str) -> str:
    """``text`` without terminal control sequences, so it prints as plain text."""
    return _CONTROL.sub("", text)


def plain(text: str) -> str:
    """``text`` without terminal control sequences, its line breaks kept: what the renderer
    makes of every text that came from outside before it reaches the terminal. A carriage
    return goes too, and nothing it would have hidden on a terminal ("evil.sh\\rtrain.log")."""
    return _CONTROL_BUT_NEWLINE.sub("", text)


def shown(text: str, limit: int) -> str:
    """At most ``limit`` characters of ``text`` without control sequences, a cut marked with
    an ellipsis; only the start of ``text`` is ever looked at."""
    clean = strip_controls(text[:limit + 1])
    return clean if len(clean) <= limit else clean[:max(0, limit - 1)] + CUT


def line_text(raw: bytes) -> str:
    """One raw line of a log as text: undecodable bytes replaced, carriage returns (a progress
    bar's rewrites) turned into spaces, and control sequences stripped when it has any."""
    text = raw.decode("utf-8", "replace").rstrip("\r\n").replace("\r", " ")
    return text if text.isprintable() else strip_controls(text)
