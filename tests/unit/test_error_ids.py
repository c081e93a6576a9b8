"""The error-id registry (ddpkit/error_ids.py) and the source agree: every id raised is registered
with the class it is raised with, every registered id is raised, and no code compares an error id
with a string literal (it uses the registry's constants)."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from ddpkit import error_ids
from ddpkit.error_ids import ERROR_IDS

SRC = Path(__file__).resolve().parents[2] / "src" / "ddpkit"
KINDS = {kind.__name__ for kind in set(ERROR_IDS.values())}


def _raised() -> dict[str, set[tuple[str, str]]]:
    """id -> {(class name, file:line)} for every construction of a ddpkit error in src/."""
    found: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name not in KINDS:
                continue
            first = node.args[0]
            values = [first.body, first.orelse] if isinstance(first, ast.IfExp) else [first]
            where = f"{path.relative_to(SRC)}:{node.lineno}"
            for value in values:
                assert isinstance(value, ast.Constant) and isinstance(value.value, str), (
                    f"{where}: the error id is not a string literal")
                found[value.value].add((name, where))
    return found


def test_every_raised_id_is_registered_with_its_class() -> None:
    wrong = {f"{error_id} as {kind} at {where}"
             for error_id, sites in _raised().items() for kind, where in sites
             if error_id not in ERROR_IDS or ERROR_IDS[error_id].__name__ != kind}
    assert wrong == set()


def test_every_registered_id_is_raised_somewhere() -> None:
    assert set(ERROR_IDS) - set(_raised()) == set()


def test_ids_are_kebab_case_and_listed_once() -> None:
    listed = [error_id for ids in error_ids._BY_KIND.values() for error_id in ids]
    assert len(listed) == len(set(listed))
    assert [i for i in listed if not re.fullmatch(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*", i)] == []


def test_the_named_constants_are_registered() -> None:
    for name in ("JOB_FAILED", "JOB_STOPPED", "JOB_TIMEOUT"):
        assert getattr(error_ids, name) in ERROR_IDS


def test_no_code_compares_an_error_id_with_a_literal() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            names = {getattr(o, "attr", getattr(o, "id", "")) for o in operands}
            if not names & {"error_id", "id"}:
                continue
            literals = [c.value for o in operands for c in ast.walk(o)
                        if isinstance(c, ast.Constant) and isinstance(c.value, str)]
            if any(value in ERROR_IDS for value in literals):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert offenders == []
