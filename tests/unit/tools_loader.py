"""The repository's tools/ scripts (catalogue, docs and i18n generators) imported by tests.

tools/ is no package and not on sys.path: ``tool("msgmap")`` puts it there for the import only
(the tools import each other by bare name), so no test leaves it behind for the ones after it.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def tool(name: str) -> ModuleType:
    """tools/``name``.py as a module (imported once, then taken from sys.modules)."""
    sys.path.insert(0, str(TOOLS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(TOOLS))
