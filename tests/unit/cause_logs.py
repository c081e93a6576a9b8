"""One log of template lines, diagnosed: the top finding (the causes' tests share it); and the
same lines stored another way, read against them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose


def top(tmp_path: Path, lines: list[str]) -> Finding:
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose([str(log)])[0]


def tops(tmp_path: Path, lines: list[str], rewrite: Callable[[str], str]) -> tuple[Finding, ...]:
    """The top findings of ``lines`` as they are and with ``rewrite`` applied to each line."""
    plain, other = tmp_path / "plain.log", tmp_path / "other.log"
    plain.write_text("\n".join(lines) + "\n")
    other.write_text("".join(rewrite(line) + "\n" for line in lines))
    return diagnose([str(plain)])[0], diagnose([str(other)])[0]
