"""``Step``: one action of ``sim up`` as data (a command to run, or a file to write)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Step:
    """One action of ``up``: run ``argv`` (tool name first), or write ``content`` to ``path``."""

    summary: str
    argv: tuple[str, ...] = ()
    path: str = ""
    content: str = ""

    @property
    def is_command(self) -> bool:
        return bool(self.argv)

    def shell(self) -> str:
        """The step as one line of shell, for ``--dry-run``."""
        if self.argv:
            return shlex.join(self.argv)
        target = shlex.quote(self.path)
        lines = self.content.splitlines()
        if not self.content:
            write = f": > {target}"
        elif self.content.endswith("\n"):
            write = f"printf '%s\\n' {' '.join(shlex.quote(line) for line in lines)} > {target}"
        else:
            write = f"printf %s {shlex.quote(self.content)} > {target}"
        if self.path.startswith("/proc/"):
            return write
        return f"mkdir -p {shlex.quote(self.path.rsplit('/', 1)[0])} && {write}"

    def to_dict(self) -> dict[str, Any]:
        if self.argv:
            return {"summary": self.summary, "argv": list(self.argv)}
        return {"summary": self.summary, "path": self.path, "content": self.content}
