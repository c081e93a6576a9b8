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
        parent, path = shlex.quote(self.path.rsplit("/", 1)[0]), shlex.quote(self.path)
        return f"mkdir -p {parent} && printf %s {shlex.quote(self.content)} > {path}"

    def to_dict(self) -> dict[str, Any]:
        if self.argv:
            return {"summary": self.summary, "argv": list(self.argv)}
        return {"summary": self.summary, "path": self.path, "content": self.content}
