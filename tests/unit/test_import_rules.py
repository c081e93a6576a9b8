"""House rules checked on the source: the library never reaches into the CLI or terminal
libraries, and the programs that run inside ranks stay light. The layers themselves are in
docs/architecture.md, and import-linter checks them (tests/unit/test_import_contract.py)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "ddpkit"
# What a worker may import from ddpkit itself: modules that need only the stdlib (and torch).
WORKER_DDPKIT_ALLOWED = ("ddpkit.atomic_file", "ddpkit.bench.formulas", "ddpkit.bench.setting",
                         "ddpkit.bench.tcp",
                         "ddpkit.ddp", "ddpkit.workers", "ddpkit.errors", "ddpkit.file_safety")


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("ddpkit"):  # `from ddpkit.bench import tcp` is ddpkit.bench.tcp
                names.extend(f"{node.module}.{alias.name}" for alias in node.names)
            else:
                names.append(node.module)
    return names


def _modules(under: Path) -> list[Path]:
    return sorted(p for p in under.rglob("*.py"))


LIBRARY = [p for p in _modules(SRC) if "cli" not in p.relative_to(SRC).parts
           and p.name != "__main__.py"]
WORKERS = _modules(SRC / "workers")


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(SRC)))
def test_library_never_imports_the_cli_or_terminal_libraries(path: Path) -> None:
    bad = [name for name in _imports(path)
           if name.split(".")[0] in ("argparse", "rich") or name.startswith("ddpkit.cli")]
    if path.parent.name == "workers":  # programs with their own command line
        bad = [name for name in bad if name != "argparse"]
    assert bad == [], f"{path.relative_to(SRC)} imports {bad}"


@pytest.mark.parametrize("path", WORKERS, ids=lambda p: p.name)
def test_workers_import_only_stdlib_torch_and_light_ddpkit_modules(path: Path) -> None:
    stdlib = sys.stdlib_module_names
    bad = []
    for name in _imports(path):
        top = name.split(".")[0]
        if top in stdlib or top == "torch" or top == "__future__":
            continue
        if top == "ddpkit" and name.startswith(WORKER_DDPKIT_ALLOWED):
            continue
        bad.append(name)
    assert bad == [], f"{path.name} imports {bad}"


@pytest.mark.parametrize("module", sorted(set(WORKER_DDPKIT_ALLOWED) - {"ddpkit.workers"}))
def test_modules_workers_use_stay_light(module: str) -> None:
    path = SRC.joinpath(*module.split(".")[1:]).with_suffix(".py")
    for name in _imports(path):
        top = name.split(".")[0]
        assert top in sys.stdlib_module_names or top in ("torch", "__future__") or \
            name.startswith(WORKER_DDPKIT_ALLOWED), f"{module} imports {name}"


# torch's ``*_object`` collectives pickle, and so would any use of pickle itself: values between
# ranks and nodes travel as JSON bytes (ddpkit.workers.json_collective, launch.token, doctor.cluster).
_PICKLING_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "shelve", "marshal"}
# The one reader of a pickled file: torch's flight recorder writes its dumps to disk in that format
# only (NCCL's watchdog, TORCH_FR_DUMP_TEMP_FILE), and `doctor --log` reads them with an unpickler
# that refuses every global (tests/unit/test_doctor_flight_recorder.py proves nothing can run).
# Nothing ddpkit sends between processes or nodes is pickled.
_DUMP_READER = Path("doctor/log/flight_recorder.py")


@pytest.mark.parametrize("path", _modules(SRC), ids=lambda p: str(p.relative_to(SRC)))
def test_no_pickle_and_no_object_collectives(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    bad = [name for name in _imports(path) if name.split(".")[0] in _PICKLING_MODULES
           and path.relative_to(SRC) != _DUMP_READER]
    for node in ast.walk(tree):
        called = node.func if isinstance(node, ast.Call) else None
        name = (called.attr if isinstance(called, ast.Attribute)
                else called.id if isinstance(called, ast.Name) else "")
        if name.endswith("_object") or name.endswith("_object_list") or name in ("load", "loads") \
                and isinstance(called, ast.Attribute) and isinstance(called.value, ast.Name) \
                and called.value.id in _PICKLING_MODULES:
            bad.append(f"{name}() at line {node.lineno}")
    assert bad == [], f"{path.relative_to(SRC)}: {bad}"


def test_the_grep_of_the_issue_finds_nothing() -> None:
    """`grep -rn "_object(\\|pickle" src/` is the project's promise, word for word."""
    hits = [f"{p.relative_to(SRC)}:{i}" for p in _modules(SRC)
            for i, line in enumerate(p.read_text().splitlines(), 1)
            if "_object(" in line or "pickle" in line and p.relative_to(SRC) != _DUMP_READER]
    assert hits == []


def test_the_dump_reader_refuses_every_global() -> None:
    """The one module allowed to unpickle overrides find_class and never calls pickle.load(s)."""
    source = (SRC / _DUMP_READER).read_text()
    tree = ast.parse(source)
    assert "pickle.load(" not in source and "pickle.loads(" not in source
    (reader,) = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
                 and any(ast.unparse(b) == "pickle.Unpickler" for b in n.bases)]
    (find_class,) = [f for f in reader.body if isinstance(f, ast.FunctionDef)
                     and f.name == "find_class"]
    assert [type(s) for s in find_class.body] == [ast.Raise]


def _module_graph() -> dict[str, set[str]]:
    """Module -> the ddpkit modules it imports anywhere (function-level imports included)."""
    paths = {".".join(p for p in path.relative_to(SRC.parent).with_suffix("").parts
                      if p != "__init__"): path for path in _modules(SRC)}

    def module_of(name: str) -> str:  # `from ddpkit.net.select import x` imports ddpkit.net.select
        return name if name in paths or "." not in name else module_of(name.rsplit(".", 1)[0])

    return {name: {module_of(n) for n in _imports(path) if n.startswith("ddpkit.")}
            for name, path in paths.items()}


def test_net_has_no_import_circle() -> None:
    graph = _module_graph()
    net = {m for m in graph if m.startswith("ddpkit.net.")}
    for module in sorted(net):
        seen: set[str] = set()
        todo = [t for t in graph[module] if t in net]
        while todo:
            current = todo.pop()
            assert current != module, f"{module} imports itself through {sorted(seen)}"
            if current not in seen:
                seen.add(current)
                todo.extend(t for t in graph.get(current, ()) if t in net)


def test_the_setting_grammar_has_one_home() -> None:
    """bench/planning/model.py, workers/scaling.py and ddp.py read settings through ddpkit.bench.setting;
    none of them spells the names of the hooks itself."""
    for relative in ("bench/planning/model.py", "workers/scaling.py", "ddp.py"):
        text = (SRC / relative).read_text()
        assert "ddpkit.bench.setting" in text or "from ddpkit.bench import setting" in text, relative
        assert '"bf16", "fp16"' not in text and "none|bf16|fp16" not in text, relative
