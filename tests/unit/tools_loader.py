"""The repository's tools/ scripts (catalogue, docs and i18n generators) as tests use them.

tools/ is no package and not on sys.path: ``tool("msgmap")`` puts it there for the import only
(the tools import each other by bare name), so no test leaves it behind for the ones after it.
``run_catalogue`` runs tools/catalogue_messages.py as a program into a test's directory;
``shipped_catalogue`` is the data file it wrote for the package.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools"
CATALOGUE_DATA = ROOT / "src" / "ddpkit" / "doctor" / "log" / "messages.json"


def tool(name: str) -> ModuleType:
    """tools/``name``.py as a module (imported once, then taken from sys.modules)."""
    sys.path.insert(0, str(TOOLS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(TOOLS))


def _document(path: Path) -> dict[str, object]:
    loaded = json.loads(path.read_text())
    assert isinstance(loaded, dict)
    return loaded


def shipped_catalogue() -> dict[str, object]:
    """The message catalogue's data file as the package ships it."""
    return _document(CATALOGUE_DATA)


def run_catalogue(tmp_path: Path, *args: str, timeout: float = 120) -> dict[str, object]:
    """The data file ``tools/catalogue_messages.py ARGS`` writes (it and its coverage report go
    to ``tmp_path``); a failed run raises CalledProcessError."""
    out, report = tmp_path / "m.json", tmp_path / "c.md"
    subprocess.run([sys.executable, str(TOOLS / "catalogue_messages.py"), *args, "--out", str(out),
                    "--report", str(report)], check=True, capture_output=True, timeout=timeout)
    return _document(out)
