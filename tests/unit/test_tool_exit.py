"""The generator tools end with one line and exit 1 when the file system refuses what they write
(tools/tool_exit.py): no traceback, and the file they were replacing stays whole."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tools_loader import CATALOGUE_DATA, TOOLS


def test_a_refused_output_path_is_one_line_and_exit_1(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    report = tmp_path / "coverage.md"
    report.write_text("the old report\n")
    done = subprocess.run([sys.executable, str(TOOLS / "catalogue_messages.py"), "--remap",
                           str(CATALOGUE_DATA), "--out", str(blocker / "messages.json"),
                           "--report", str(report)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("catalogue_messages: cannot write") and str(blocker) in line
    assert "not a directory" in line.lower() and "rerun" in line
    assert report.read_text() == "the old report\n"  # nothing after the refusal was written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "coverage.md"]


def test_the_tools_exit_code_passes_through() -> None:
    sys.path.insert(0, str(TOOLS))
    try:
        import tool_exit
    finally:
        sys.path.remove(str(TOOLS))
    assert tool_exit.run(lambda: 3, "x") == 3
