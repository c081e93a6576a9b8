"""The layer contracts of pyproject.toml (docs/architecture.md), checked with import-linter: they hold
on the tree, and they fail when a back-edge comes back, also one hidden in a function body (the
way cli/'s old cycle was hidden from Python and from tests/unit/test_import_rules.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = shutil.which("lint-imports", path=os.path.dirname(sys.executable)) or \
    shutil.which("lint-imports")

pytestmark = pytest.mark.skipif(LINT_IMPORTS is None, reason="import-linter is not installed "
                                "(pip install -e '.[test]')")


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports on the copy of the package under ``tree``/src, found first on sys.path."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "src" / "ddpkit", tmp_path / "src" / "ddpkit",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _add_function_import(path: Path, module: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(f"\n\ndef _back_edge() -> None:\n    import {module}  # noqa: F401\n")


def test_the_tree_keeps_every_contract(tmp_path: Path) -> None:
    done = _lint(_copy(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(("importer", "imported", "contract"), [
    # a shared value reaching up into a driver, inside a function
    ("launch/config.py", "ddpkit.launch.join.driver", "cli -> drivers"),
    # torchrun's edge reaching into hang detection
    ("launch/torchrun/command.py", "ddpkit.launch.hang.watcher", "cli -> drivers"),
    # the old cli cycle: a whole-job front end importing a command, a command importing the entry
    ("cli/job/join_mode.py", "ddpkit.cli.commands.test", "cli: the entry"),
    ("cli/commands/join.py", "ddpkit.cli.main", "cli: the entry"),
    # the token front end borrowing from the ssh one
    ("cli/job/join_mode.py", "ddpkit.cli.job.hosts_mode", "cli.job:"),
    # one command borrowing from another
    ("cli/commands/bench.py", "ddpkit.cli.commands.launch", "no command imports another"),
    # a rank program importing the launcher
    ("workers/ddp_test.py", "ddpkit.launch.node.session", "the programs that run inside ranks"),
])
def test_a_back_edge_breaks_its_contract(tmp_path: Path, importer: str, imported: str,
                                          contract: str) -> None:
    tree = _copy(tmp_path)
    _add_function_import(tree / "src" / "ddpkit" / importer, imported)
    done = _lint(tree)
    assert done.returncode != 0, done.stdout
    broken = done.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken and imported in broken, done.stdout


def test_no_module_is_part_of_an_import_cycle() -> None:
    """Across the whole package, function-level imports included: the layers hold between
    packages, this between any two modules (the cli cycle was seven modules long)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("ddpkit")
    modules = sorted(m for m in graph.modules if m.startswith("ddpkit"))
    edges = {m: sorted(d for d in graph.find_modules_directly_imported_by(m)
                       if d.startswith("ddpkit") and d != m) for m in modules}
    # Tarjan's strongly connected components, iteratively
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0
    for start in modules:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            if child < len(edges[node]):
                work.append((node, child + 1))
                nxt = edges[node][child]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    assert cycles == [], cycles
