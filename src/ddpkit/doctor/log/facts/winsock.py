"""Windows Sockets' error codes read as the Linux errnos of the same names, and the class of a
failed connect (refused, timed out, unreachable, aborted) whichever system printed it.

winsock2.h defines each WSAE* code as WSABASEERR (10000) plus the BSD errno of its name
(WSAEADDRINUSE 10048, WSAECONNREFUSED 10061; facts/kinds.WINSOCK_ERRNOS), and a Windows log
prints the code with its text in the system's language, so the code is what says what failed.
"""

from __future__ import annotations

import re

from ddpkit.doctor.log.facts.kinds import ERRNO_BY_NAME, ERRNOS, WINSOCK_ERRNOS, WINSOCK_PREFIX

_WINSOCK = re.compile(rf"\b{WINSOCK_PREFIX}(100[0-6]\d)\b|\bWSA(E[A-Z]{{3,14}})\b")


def winsock_errnos(text: str) -> list[int]:
    """The Linux errno of each Windows Sockets code ``text`` names (``WINSOCK_ERRNOS``)."""
    found: list[int] = []
    if "100" not in text and "WSAE" not in text:
        return found
    for code, name in _WINSOCK.findall(text):
        number = WINSOCK_ERRNOS.get(int(code)) if code else ERRNO_BY_NAME.get(name)
        if number is not None:
            found.append(number)
    return found


# a Windows Sockets code's class (its words, in the system's language, may say nothing English)
_WINSOCK_CLASS = {"ECONNREFUSED": "refused", "ETIMEDOUT": "timeout", "ENETUNREACH": "unreachable",
                  "EHOSTUNREACH": "unreachable", "ECONNABORTED": "abort"}


def error_class(text: str) -> str:
    """``refused``, ``timeout``, ``unreachable``, ``abort`` or ``other`` for a connect error."""
    for number in winsock_errnos(text):
        if ERRNOS[number][0] in _WINSOCK_CLASS:
            return _WINSOCK_CLASS[ERRNOS[number][0]]
    lowered = text.lower()
    if "refused" in lowered:
        return "refused"
    if "timed out" in lowered or "timeout" in lowered or "etimedout" in lowered:
        return "timeout"
    if "no route" in lowered or "unreachable" in lowered:
        return "unreachable"
    if "abort" in lowered:
        return "abort"
    return "other"
