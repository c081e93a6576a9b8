"""One log of template lines, diagnosed: the top finding (the causes' tests share it)."""

from __future__ import annotations

from pathlib import Path

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose


def top(tmp_path: Path, lines: list[str]) -> Finding:
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose([str(log)])[0]
