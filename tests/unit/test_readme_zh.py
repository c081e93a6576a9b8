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


# Issue 35: README.zh-CN.md is the whole README, not a subset. Each heading of README.md (## and
# ###, in order) and its Chinese one; the Chinese page may have sections of its own besides.
HEADINGS = {
    "## Get the code": "## 获取代码",
    "## Try it on one machine (two simulated nodes)": "## 在一台机器上试一试（模拟两个节点）",
    "## Run the tests": "## 运行测试",
    "## On a real cluster": "## 在真实集群上",
    "### The whole job from the master": "### 从主节点管理整个任务",
    "## Exit codes": "## 退出码",
    "## More": "## 更多文档",
}


def _headings(text: str) -> list[str]:
    outside = re.sub(r"```.*?```", "", text, flags=re.S)
    return [line for line in outside.splitlines() if re.match(r"#{2,3} ", line)]


def test_every_section_of_the_readme_has_its_chinese_one_in_the_same_order() -> None:
    english = _headings(README)
    assert english == list(HEADINGS), "a README.md section changed: map it here and in zh"
    chinese = [h for h in _headings(README_ZH) if h in HEADINGS.values()]
    assert chinese == list(HEADINGS.values())


def _commands(text: str) -> list[str]:
    """The command lines of every ```bash block (comments, which are translated, left out)."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            command = re.sub(r"\s+#.*$", "", line).rstrip()
            if command and not command.lstrip().startswith("#"):
                lines.append(command)
    return lines


def test_every_command_of_the_readme_is_in_the_chinese_one() -> None:
    assert _commands(README_ZH) == _commands(README)


def test_the_command_table_has_every_command() -> None:
    table = re.findall(r"^\| `(ddpkit [^`]*)` \|", README, re.M)
    assert len(table) >= 11 and "ddpkit explain ID" in table
    assert table == re.findall(r"^\| `(ddpkit [^`]*)` \|", README_ZH, re.M)


def test_no_hard_line_break_inside_chinese_prose() -> None:
    """A line break next to a Chinese character renders as a stray space: Chinese paragraphs are
    one line each (code blocks, tables, lists and headings aside)."""
    outside = re.sub(r"```.*?```", "", README_ZH, flags=re.S)
    lines = outside.splitlines()
    cjk = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")
    broken = [f"{a!r} / {b!r}" for a, b in zip(lines, lines[1:])
              if a.strip() and b.strip() and not re.match(r"[#|\-]|\d+\. ", b.lstrip())
              and not re.match(r"[#|]", a.lstrip()) and (cjk.match(a[-1]) or cjk.match(b[0]))]
    assert broken == []


def test_installing_from_inside_china() -> None:
    section = README_ZH.split("### 在国内安装", 1)[1].split("\n## ", 1)[0]
    assert "pip install -i https://" in section and "git clone --depth 1" in section


@pytest.mark.parametrize(("text", "heading"), [(README, "On a real cluster"),
                                               (README_ZH, "在真实集群上")])
def test_a_real_cluster_keeps_the_images_torch(text: str, heading: str) -> None:
    section = text.split("\n## " + heading, 1)[1].split("\n## ", 1)[0]
    commands = "\n".join(_commands(section))
    assert "pip install -e ." in commands
    assert "torch==" not in commands and "pip install torch" not in commands
    assert "torch==2.13.0" in section  # named only to say it is the demo's, not for here
