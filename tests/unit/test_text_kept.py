"""Issue 35: a translated ``Text`` is not turned back into English on its way to the terminal.

``str()`` of a Text (and of an exception whose one argument is a Text) is the Text itself; an
argparse type function's Text reaches the error in the user's language; and no source line puts a
``_()`` text (or a name bound to one in the same function) into an f-string, a ``+``/``%`` or a
``join``, which would keep only its English. ``tests/unit/test_zh_everywhere.py`` guards the same
at run time over every command's Chinese output.
"""

from __future__ import annotations

import ast
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddpkit.cli.main import main
from ddpkit.cli.output.console import Console
from ddpkit.i18n import Text, _, localized, use_language

pytestmark = pytest.mark.timeout(60)

SOURCE = Path(__file__).resolve().parents[2] / "src" / "ddpkit"
_MAKERS = {"_", "_n"}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


@pytest.fixture(autouse=True)
def english_after() -> Iterator[None]:
    """``main`` chooses the language of the run: English again for the tests after this one."""
    yield
    use_language("en")


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``scope`` outside the functions and classes defined in it."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, _SCOPES):
            todo.extend(ast.iter_child_nodes(node))


def _is_text(node: ast.AST, names: set[str]) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in _MAKERS
    return isinstance(node, ast.Name) and node.id in names


def text_made_english(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, how) of every place in ``tree`` a Text goes through an f-string, ``+``, ``%`` or a
    ``join`` (an f-string's ``!r`` is a repr on purpose, left alone)."""
    found: list[tuple[int, str]] = []
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, _SCOPES))]
    for scope in scopes:
        nodes = list(_own_nodes(scope))
        names = {target.id for node in nodes if isinstance(node, ast.Assign)
                 and _is_text(node.value, set()) for target in node.targets
                 if isinstance(target, ast.Name)}
        for node in nodes:
            if (isinstance(node, ast.FormattedValue) and node.conversion != ord("r")
                    and _is_text(node.value, names)):
                found.append((node.lineno, "f-string"))
            elif (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod))
                  and (_is_text(node.left, names) or _is_text(node.right, names))):
                found.append((node.lineno, "+ or %"))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "join" and node.args):
                items = node.args[0]
                parts = (items.elts if isinstance(items, (ast.List, ast.Tuple, ast.Set)) else
                         [items.elt] if isinstance(items, (ast.GeneratorExp, ast.ListComp))
                         else [items])
                if any(_is_text(part, names) for part in parts):
                    found.append((node.lineno, "join"))
    return sorted(set(found))


def test_the_check_finds_each_way_of_losing_the_translation() -> None:
    source = '''
def f(items):
    label = _("label")
    a = f"x {_('y')}"
    b = label + ": "
    c = ", ".join([_("one"), _("two")])
    d = ", ".join(_("n {i}", i=i) for i in items)
    e = f"{label!r}"
    return _("{a}{b}", a=label, b=_("kept"))
'''
    assert [how for _line, how in text_made_english(ast.parse(source))] == [
        "f-string", "+ or %", "join", "join"]


def test_no_source_line_turns_a_text_into_english() -> None:
    found = [f"{path.relative_to(SOURCE.parent.parent)}:{line}: {how}"
             for path in sorted(SOURCE.rglob("*.py"))
             for line, how in text_made_english(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == [], "pass the Text as a placeholder value of another _() instead"


def test_str_keeps_the_text(chinese: None) -> None:
    text = _("options")
    assert isinstance(str(text), Text) and str(text) == "options"
    error = ValueError(_("{text!r} is not a number of machines", text="abc"))
    assert localized(str(error)) != "'abc' is not a number of machines"
    assert "abc" in localized(str(error))


@pytest.mark.parametrize("argv", [["launch", "--nnodes", "abc", "x.py"],
                                  ["launch", "--nnodes", "2:4", "x.py"],
                                  ["bench", "-b", "1Q", "--dry-run"]])
def test_a_type_functions_message_reaches_the_user_in_chinese(argv: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--lang", "zh", *argv], Console(out=out, err=err, color=False, width=80))
    assert code == 2
    message = err.getvalue()
    assert "错误" in message
    for english in ("is not a number", "elastic ranges", "is not a sweep size", "argument "):
        assert english not in message, message


def test_a_ranks_check_detail_is_shown_in_the_users_language(chinese: None) -> None:
    from ddpkit.clustertest import detail_text

    english = "3 steps, 2632 params bit-identical across ranks"
    entry = {"detail": english, "say": {"id": "ddp", "steps": 3, "params": 2632}}
    assert detail_text(entry) == english  # the English value is the rank's own words
    assert localized(detail_text(entry)) == "3 步，2632 个参数在各 rank 间逐位一致"
    for say in ({"id": "nonesuch"}, {"id": "ddp", "steps": 3}, {"id": "busbw", "busbw": "x",
                                                                  "size": "4 MiB"}, "ddp"):
        assert localized(detail_text({"detail": english, "say": say})) == english


def test_interface_kinds_are_words_of_the_users_language(chinese: None) -> None:
    from ddpkit.net.interfaces import NicKind

    assert localized(NicKind.PHYSICAL.word()) == "物理网卡"
    assert NicKind.PHYSICAL.word() == "physical" and NicKind.VETH.word() == "veth"
