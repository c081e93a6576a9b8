"""The one warning type of this package: a stable id, a one-line cause, a fix, and where it is."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NcclConfWarning:
    """Something about NCCL's configuration that will not do what its author meant.

    ``id`` is kebab-case and stable (docs and tests use it); ``path``/``line`` point at the file
    line it is about, when there is one.
    """

    id: str
    message: str
    hint: str = ""
    path: str | None = None
    line: int | None = None

    @property
    def where(self) -> str:
        """``path:line``, ``path``, or "" when the warning is not about a file."""
        if self.path is None:
            return ""
        return f"{self.path}:{self.line}" if self.line is not None else self.path

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
