"""README.zh-CN.md: linked from README.md's first lines, the same two commands, the same exit codes,
error links that land on an anchor of docs/errors.zh-CN.md, the seed guide's headings mapped, and
a quoted last line the CI check (tools/last_line.py) can read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tools_loader import tool

from ddpkit.errors import ExitCode

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
README_ZH = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")


LAST_LINE = tool("last_line")


def _first_bash_block(text: str, heading: str) -> str:
    section = text.split("\n## " + heading, 1)[1]
    found = re.search(r"```bash\n(.*?)```", section, re.S)
    assert found, heading
    return found.group(1).strip()


def test_readme_links_the_zh_readme_in_its_first_lines() -> None:
    assert "中文说明：[README.zh-CN.md](README.zh-CN.md)" in README.splitlines()[:5]


@pytest.mark.parametrize(("english", "chinese"), [("Try it on one machine", "在一台机器上试一试"),
                                                  ("Run the tests", "运行测试")])
def test_the_two_commands_are_the_readme_ones_word_for_word(english: str, chinese: str) -> None:
    assert _first_bash_block(README_ZH, chinese) == _first_bash_block(README, english)


def _exit_rows(text: str, heading: str) -> dict[int, str]:
    section = text.split("\n## " + heading, 1)[1].split("\n## ", 1)[0]
    return {int(code): name for code, name in re.findall(r"^\| (\d+) \| ([a-z-]+) \|", section, re.M)}


def test_exit_code_table_is_the_readme_one() -> None:
    zh = _exit_rows(README_ZH, "退出码")
    assert zh == _exit_rows(README, "Exit codes")
    assert set(zh) == {int(code) for code in ExitCode}


def test_error_links_land_on_anchors() -> None:
    anchors = set(re.findall(r'<a id="([^"]+)"></a>',
                             (ROOT / "docs" / "errors.zh-CN.md").read_text(encoding="utf-8")))
    links = re.findall(r"docs/errors\.zh-CN\.md#([a-z0-9-]+)", README_ZH)
    assert len(links) >= 8
    assert sorted(set(links) - anchors) == []


def test_the_seed_guides_headings_are_each_mapped_to_a_command() -> None:
    table = README_ZH.split("## 对照服务商文档", 1)[1].split("\n## ", 1)[0]
    for heading in ("多机多卡并行", "查看网卡和IP", "测试", "master节点执行", "worker节点执行",
                    "常见问题"):
        rows = [row for row in table.splitlines() if row.startswith(f"| {heading}")
                or f"/ {heading}" in row]
        assert rows and "`ddpkit " in rows[0], heading


def test_the_quoted_last_line_matches_a_line_of_that_shape() -> None:
    quote = LAST_LINE.quoted(README_ZH, LAST_LINE.LEAD_INS["zh"])
    assert re.search(r"[\u4e00-\u9fff]", quote)
    printed = re.sub(r"0\.66", "1.25", quote)  # other figures match; other words do not
    assert LAST_LINE.matches(quote, printed)
    assert not LAST_LINE.matches(quote, printed.replace("全部检查通过", "检查失败"))
    assert not LAST_LINE.matches(quote, printed + " ·")
    english = LAST_LINE.quoted(README, LAST_LINE.LEAD_INS["en"])
    assert not LAST_LINE.matches(quote, english)
