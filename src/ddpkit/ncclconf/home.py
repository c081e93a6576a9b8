"""Where NCCL looks for ``~/.nccl.conf``: the one home of that rule."""

from __future__ import annotations

import os
import pwd
from pathlib import Path


def nccl_home() -> Path:
    """The directory NCCL takes ``~`` from: the account's home in the password database (not
    ``$HOME``, which NCCL ignores)."""
    try:
        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:  # no passwd entry (some containers): NCCL then reads no ~/.nccl.conf
        return Path.home()
