"""Issue 23: every user-facing string goes through the catalogue, and zh_CN translates all of it.

* ``test_user_facing_strings_are_wrapped``: a static check over ``src/ddpkit`` (one case per
  area, so ``-k launch`` checks one): the places a string reaches the user (an error's message and
  fix, a render call, argparse help, a finding's or catalogue entry's title/explanation/fix, a
  command's HELP) must hold ``_("...")``/``_n(...)`` with a literal template, never a bare literal,
  an f-string, ``+``/``%``/``.format`` on a literal.
* ``test_every_message_is_translated``: ``tools/i18n.py check`` (Babel extraction) finds no
  message without a zh_CN translation and no translation that changes the placeholders.
* ``test_shipped_catalogue_is_compiled_from_po``: the ``.mo`` in the package is what
  ``tools/i18n.py compile`` makes of ``po/`` now.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from tools_loader import tool

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "ddpkit"

babel = pytest.importorskip("babel", reason="Babel is a test extra (pip install -e '.[test]')")
catalogue_tool = tool("i18n")  # tools/i18n.py

# Programs that run inside the ranks (their output is a rank's, not ddpkit's console) and the sim's
# shell steps are not scanned; everything else is.
_AREAS = ("cli", "launch", "doctor", "bench", "net", "ncclconf", "sim", "ground")
_ERRORS = {"DdpkitError", "UsageError", "ConfigError", "EnvironmentProblem", "NetworkProblem",
           "JobFailed", "DeadlineExceeded"}
_RENDER = {"line", "wrapped", "status", "warn", "result", "log"}
_HELP_KWARGS = {"help", "description", "epilog", "title"}
_FINDING_FIELDS = {"title", "explanation", "fix"}
_TRANSLATORS = {"_", "_n"}


def _area_files(area: str) -> list[Path]:
    if area == "ground":
        return sorted(p for p in SOURCE.glob("*.py") if p.name not in ("i18n.py", "ddp.py"))
    return sorted((SOURCE / area).rglob("*.py"))


def _callee(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _prose(text: str) -> bool:
    return any(char.isalpha() for char in text)


def _untranslated(node: ast.expr | None) -> Iterator[ast.expr]:
    """The parts of an expression that put English text in front of the user untranslated."""
    if node is None:
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        if _prose(node.value):
            yield node
    elif isinstance(node, ast.JoinedStr):
        if any(isinstance(v, ast.Constant) and _prose(str(v.value)) for v in node.values):
            yield node
    elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        yield from _untranslated(node.left)
        if isinstance(node.op, ast.Add):
            yield from _untranslated(node.right)
    elif isinstance(node, ast.IfExp):
        yield from _untranslated(node.body)
        yield from _untranslated(node.orelse)
    elif isinstance(node, ast.BoolOp):
        for value in node.values:
            yield from _untranslated(value)
    elif isinstance(node, (ast.Tuple, ast.List)):
        for element in node.elts:
            yield from _untranslated(element)
    elif isinstance(node, ast.Call):
        if _callee(node) == "format" and isinstance(node.func, ast.Attribute):
            yield from _untranslated(node.func.value)
        elif _callee(node) in _TRANSLATORS:
            template = node.args[0] if node.args else None
            if not (isinstance(template, ast.Constant) and isinstance(template.value, str)):
                yield node  # a template Babel cannot extract (a variable, an f-string)


def _sinks(tree: ast.AST, path: Path) -> Iterator[ast.expr]:
    """The expressions of a module that reach the user as text."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _callee(node)
            kwargs = {k.arg: k.value for k in node.keywords if k.arg}
            if name in _ERRORS:
                yield from node.args[1:3]
                yield from (v for k, v in kwargs.items() if k in ("message", "hint"))
            elif name == "Interrupted":
                yield from node.args[:1]
            elif name in _RENDER and isinstance(node.func, ast.Attribute) \
                    and getattr(node.func.value, "id", "") == "render":
                yield from node.args[1:2]
            elif name == "table" and getattr(node.func, "value", None) is not None:
                yield from node.args[1:2]
                yield from (v for k, v in kwargs.items() if k == "title")
            elif name in ("add_argument", "add_flag", "add_parser", "add_argument_group",
                          "ArgumentParser", "Parser", "add_mutually_exclusive_group"):
                yield from (v for k, v in kwargs.items() if k in _HELP_KWARGS)
                if name == "add_argument_group":
                    yield from node.args[:2]
            elif name in ("Entry", "Finding"):
                yield from node.args[2:5]
                yield from (v for k, v in kwargs.items() if k in _FINDING_FIELDS)
            elif name == "replace":
                yield from (v for k, v in kwargs.items() if k in _FINDING_FIELDS)
        elif isinstance(node, ast.Assign) and "cli/commands" in path.as_posix():
            names = {t.id for t in node.targets if isinstance(t, ast.Name)}
            if names & {"HELP", "EXAMPLES"}:
                yield node.value


def untranslated_strings(area: str) -> list[str]:
    found = []
    for path in _area_files(area):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for sink in _sinks(tree, path):
            for part in _untranslated(sink):
                source = ast.get_source_segment(path.read_text(encoding="utf-8"), part) or ""
                found.append(f"{path.relative_to(ROOT)}:{part.lineno}: {source[:90]}")
    return found


@pytest.mark.parametrize("area", _AREAS)
def test_user_facing_strings_are_wrapped(area: str) -> None:
    found = untranslated_strings(area)
    assert not found, (f"{len(found)} user-facing strings bypass the catalogue (write "
                       "_(\"English {name}\", name=value)):\n" + "\n".join(found[:60]))


def test_the_check_sees_a_bare_message() -> None:
    """The static check is not vacuous: it flags each kind of untranslated text it looks for."""
    code = (
        "raise UsageError('bad-x', f'no {x}', 'use y')\n"
        "render.status(console, 'waiting ' + what)\n"
        "parser.add_argument('--x', help='the x')\n"
        "Finding('id', 'error', _('ok'), 'plain', _(hint))\n"
        "render.warn(console, _('fine {a}', a=1))\n"
    )
    tree = ast.parse(code)
    flagged = [ast.unparse(part) for sink in _sinks(tree, Path("x.py"))
               for part in _untranslated(sink)]
    assert flagged == ["f'no {x}'", "'use y'", "'waiting '", "'the x'", "'plain'", "_(hint)"]


def test_every_message_is_translated() -> None:
    problems = catalogue_tool.problems("zh_CN")
    assert not problems, (f"{len(problems)} messages lack a zh_CN translation or change its "
                          "placeholders (python tools/i18n.py missing > todo.po):\n"
                          + "\n".join(problems[:40]))


def test_shipped_catalogue_is_compiled_from_po() -> None:
    shipped = catalogue_tool.mo_path("zh_CN")
    assert shipped.is_file(), "run: python tools/i18n.py compile"
    assert shipped.read_bytes() == catalogue_tool.mo_bytes("zh_CN"), (
        "src/ddpkit/locale is stale: run python tools/i18n.py compile")


def _ast_templates() -> dict[str, str]:
    """Every literal template of a ``_()``/``_n()`` call in the source, read with ``ast``."""
    found: dict[str, str] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _callee(node) in _TRANSLATORS \
                    and isinstance(node.func, ast.Name) and node.args \
                    and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                found.setdefault(node.args[0].value, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_babel_extracts_every_template() -> None:
    """Babel skips some calls (a ``_()`` nested where its extractor does not look): each one the
    source holds must reach the catalogue, or it would never be translated, silently."""
    extracted = {key[0] if isinstance(key, tuple) else key for key in catalogue_tool.extract()}
    skipped = {template: where for template, where in _ast_templates().items()
               if template not in extracted}
    assert not skipped, "Babel does not extract these templates (move the inner _() out):\n" + \
        "\n".join(f"{where}: {template!r}" for template, where in sorted(skipped.items()))


def test_one_message_id_has_one_home() -> None:
    assert catalogue_tool.duplicates("zh_CN") == []


def test_every_fragment_keeps_to_the_glossary() -> None:
    assert catalogue_tool.glossary_problems("zh_CN") == []


_HEADER = 'msgid ""\nmsgstr ""\n"Language: zh_CN\\n"\n"Content-Type: text/plain; charset=utf-8\\n"\n\n'


def test_check_fails_on_a_duplicate_and_on_a_term_rendered_another_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "zh_CN").mkdir()
    (tmp_path / "zh_CN" / "a.po").write_text(
        _HEADER + 'msgid "step"\nmsgstr "每步耗时"\n\nmsgid "raw TCP baseline"\nmsgstr "原始 TCP 基线"\n',
        encoding="utf-8")
    (tmp_path / "zh_CN" / "b.po").write_text(_HEADER + 'msgid "step"\nmsgstr "步时"\n',
                                             encoding="utf-8")
    monkeypatch.setattr(catalogue_tool, "PO_DIR", tmp_path)
    assert [problem.split(" is ")[0] for problem in catalogue_tool.duplicates("zh_CN")] == [
        "zh_CN: 'step'"]
    glossary = catalogue_tool.glossary_problems("zh_CN")
    assert len(glossary) == 1 and "raw TCP" in glossary[0] and "原始 TCP" in glossary[0]
    assert catalogue_tool.main(["check"]) == 1


def test_argparse_headings_have_full_width_colons_beside_usage() -> None:
    from ddpkit.cli.command_table import build_parser
    from ddpkit.i18n import use_language

    use_language("zh")
    try:
        text = build_parser("plan")[0].format_help()
    finally:
        use_language("en")
    assert text.startswith("用法：")
    assert "\n选项：\n" in text and "选项:" not in text
