"""pyproject.toml and the code agree: every third-party module src/ imports is declared, and every
declared runtime dependency is used (rich was declared for a long time and imported nowhere)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "ddpkit"
IMPORT_NAME = {"pyyaml": "yaml"}  # distribution name -> module name, where they differ
PROGRAMS = {"py-spy"}  # declared for the executable it installs, not for an import
INDIRECT = {"numpy"}  # torch's PowerSGD hook imports it, and the torch wheel does not bring it
OPTIONAL = {"matplotlib"}  # imported lazily behind an extra (ddpkit[plot])


def _declared() -> set[str]:
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"(?ms)^dependencies = \[(.*?)^\]", text)
    assert block is not None, "pyproject.toml has no dependencies list"
    names = re.findall(r'^\s*"([A-Za-z0-9_.-]+)', block.group(1), re.M)
    return {name.lower() for name in names}


def _imported_top_levels() -> set[str]:
    found: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"ddpkit", "__future__"}


def test_every_imported_package_is_declared() -> None:
    declared = {IMPORT_NAME.get(name, name.replace("-", "_")) for name in _declared()}
    assert _imported_top_levels() - declared - OPTIONAL == set()


def test_every_declared_dependency_is_used() -> None:
    imported = _imported_top_levels()
    unused = {name for name in _declared() - PROGRAMS - INDIRECT
              if IMPORT_NAME.get(name, name.replace("-", "_")) not in imported}
    assert unused == set()
