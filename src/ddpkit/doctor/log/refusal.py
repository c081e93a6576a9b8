"""How ``doctor --log`` refuses an input it cannot read: one error, ``log-unreadable``, for log
files, run directories and flight-recorder dumps alike."""

from __future__ import annotations

from ddpkit.errors import ConfigError
from ddpkit.i18n import _

LOG_FIX = _("pass a readable file (or - for stdin); check the path and its permissions")


def unreadable(path: str, reason: str, *, what: str = _("log file"),
               fix: str = LOG_FIX) -> ConfigError:
    """The ``log-unreadable`` error for one input of ``doctor --log``."""
    return ConfigError("log-unreadable", _("cannot read {what} {path}: {reason}", what=what, path=path,
                                          reason=reason), fix,
                       details={"path": path})
