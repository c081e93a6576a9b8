"""docs/errors.md and docs/errors.zh-CN.md: an anchor, a cause and a fix for every error id and
finding id, generated from docs/errors-source.toml by tools/errors_doc.py (committed = generated)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tools_loader import tool

from ddpkit.cli.output.render import error_link
from ddpkit.doctor.catalogue import CATALOGUE
from ddpkit.error_ids import ERROR_IDS
from ddpkit.i18n import current_language, use_language

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

if sys.version_info < (3, 11):  # the generator reads TOML with tomllib
    pytest.skip("tools/errors_doc.py needs Python 3.11+", allow_module_level=True)


TOOL = tool("errors_doc")


def _anchors(page: Path) -> list[str]:
    return re.findall(r'<a id="([^"]+)"></a>', page.read_text(encoding="utf-8"))


@pytest.fixture
def language() -> Iterator[None]:
    before = current_language()
    yield
    use_language(before)


@pytest.mark.parametrize("page", ["errors.md", "errors.zh-CN.md"])
def test_every_error_id_has_its_anchor(page: str) -> None:
    anchors = _anchors(DOCS / page)
    missing = sorted(set(ERROR_IDS) - set(anchors))
    assert not missing, f"docs/{page} has no anchor for {missing}: add them to " \
        "docs/errors-source.toml, then python tools/errors_doc.py write"
    assert len(anchors) == len(set(anchors)), f"docs/{page} repeats an anchor"


@pytest.mark.parametrize("page", ["errors.md", "errors.zh-CN.md"])
def test_every_finding_id_has_its_anchor(page: str) -> None:
    anchors = set(_anchors(DOCS / page))
    missing = sorted(i for i in CATALOGUE if f"finding-{i}" not in anchors)
    assert not missing, f"docs/{page} has no finding anchor for {missing}"
    # a link to the bare id lands on the error of that id, or else on the finding
    assert not sorted(i for i in CATALOGUE if i not in anchors)


def test_source_covers_the_code_ids() -> None:
    errors, findings = TOOL.load()
    codes, severities = TOOL.known_ids()
    assert codes == {i: int(kind.exit_code) for i, kind in ERROR_IDS.items()}
    assert TOOL.problems(errors, findings, codes, severities) == []


def test_the_check_names_an_id_without_an_entry() -> None:
    errors, findings = TOOL.load()
    codes, severities = TOOL.known_ids()
    wrong = TOOL.problems(errors, findings, {**codes, "made-up-id": 5}, severities)
    assert wrong == [f"error id 'made-up-id' has no entry in {TOOL.SOURCE.name}"]
    dropped = [e for e in errors if e.id != "bad-port"]
    assert any("'bad-port'" in line for line in TOOL.problems(dropped, findings, codes,
                                                                  severities))


def test_committed_pages_are_the_generated_ones() -> None:
    texts, _problems = TOOL.pages()
    for lang, path in TOOL.PAGES.items():
        assert path.read_text(encoding="utf-8") == texts[lang], \
            f"{path.name} is out of date: python tools/errors_doc.py write"


def test_each_entry_has_a_cause_and_fix_in_both_languages() -> None:
    text = {lang: path.read_text(encoding="utf-8") for lang, path in TOOL.PAGES.items()}
    for error_id in ERROR_IDS:
        for lang, label in (("en", "**Cause:**"), ("zh", "**原因：**")):
            section = text[lang].split(f'<a id="{error_id}"></a>', 1)[1].split("<a id=", 1)[0]
            assert label in section and ("**Fix:**" in section or "**解决：**" in section)
    zh = text["zh"]
    assert len(re.findall(r"[\u4e00-\u9fff]", zh)) > 3000  # the zh page is Chinese, not a copy


@pytest.mark.parametrize(("language_code", "page"), [("en", "errors.md"), ("zh", "errors.zh-CN.md")])
def test_the_printed_link_names_this_page(language: None, language_code: str, page: str) -> None:
    use_language(language_code)  # type: ignore[arg-type]
    link = error_link("port-in-use")
    assert link.endswith("/" + page.removesuffix(".md") + "#port-in-use")  # docs/ published
    assert (DOCS / page).is_file()
