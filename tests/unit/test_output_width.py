"""Display width (issues 21 and 23): CJK characters take two columns, combining marks none, ANSI
colour codes none; truncating and wrapping count columns, not characters."""

from __future__ import annotations

import io

import pytest

from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console, terminal_width
from ddpkit.cli.output.help_format import HelpFormatter
from ddpkit.cli.output.width import display_width, elide, pad, strip_ansi, truncate, wrap

RED, RESET = "\x1b[31;1m", "\x1b[0m"
# 46 characters, the length of the sentence the help formatter printed as one 92-column line
CHINESE = "每个节点通过查找到主节点的路由来选择自己的网卡，因此不同节点上的网卡名称可以不同，无需手动设置。"


@pytest.mark.parametrize(("text", "columns"), [
    ("eth1", 4), ("网卡", 4), ("主节点 10.0.0.2", 15), ("ｅｔｈ１", 8),  # fullwidth Latin
    ("e\u0301", 1), ("cafe\u0301 ok", 7),  # e + combining acute accent
    (f"{RED}fail{RESET}", 4), (f"{RED}失败{RESET} ok", 7),
    ("\x1b]8;;https://example.org\x1b\\link\x1b]8;;\x1b\\", 4),  # an OSC 8 hyperlink
    ("한국어", 6), ("カタカナ", 8), ("a\u200bb", 2),  # zero-width space
])
def test_display_width_counts_terminal_columns(text: str, columns: int) -> None:
    assert display_width(text) == columns


def test_strip_ansi_leaves_the_text() -> None:
    assert strip_ansi(f"{RED}error [x]:{RESET} 网卡") == "error [x]: 网卡"


@pytest.mark.parametrize("columns", range(1, 16))
def test_truncate_fits_and_marks_the_cut(columns: int) -> None:
    for text in ("NCCL WARN socketStartConnect: Connect to 10.0.0.3<43210> failed",
                 "主节点无法连接：连接被拒绝", f"{RED}失败 failed{RESET}",
                 "cafe\u0301 cafe\u0301 cafe\u0301"):
        cut = truncate(text, columns)
        assert display_width(cut) <= columns
        if display_width(text) > columns:
            assert cut.endswith("…") or cut.endswith("…" + RESET)
            assert strip_ansi(cut)[:-1] == strip_ansi(text)[:len(strip_ansi(cut)) - 1]
        else:
            assert cut == text


def test_truncate_keeps_colour_and_resets_it() -> None:
    cut = truncate(f"{RED}warning: the interface is down{RESET}", 10)
    assert cut == f"{RED}warning: …{RESET}"
    assert truncate("网卡网卡", 5) == "网卡…"  # a wide character never half-fits


def test_truncate_keeps_a_combining_mark_with_its_letter() -> None:
    assert truncate("cafe\u0301 au lait", 6) == "cafe\u0301 …"


def test_pad_aligns_by_columns() -> None:
    assert display_width(pad("网卡", 6)) == 6 and pad("网卡", 6) == "网卡  "
    assert pad(f"{RED}ok{RESET}", 4) == f"{RED}ok{RESET}  "


def test_wrap_breaks_chinese_between_characters_within_the_width() -> None:
    lines = wrap(CHINESE, 58)
    assert len(lines) == 2 and all(display_width(line) <= 58 for line in lines)
    assert "".join(lines) == CHINESE
    # no line starts with closing punctuation
    assert not any(line[0] in "，。、" for line in wrap(CHINESE, 9))


def test_wrap_mixed_text_keeps_latin_words_and_spaces() -> None:
    text = "在 NCCL_SOCKET_IFNAME==eth1 之后运行 ddpkit test --nnodes 2 检查网卡"
    lines = wrap(text, 26)
    assert all(display_width(line) <= 26 for line in lines)
    assert "NCCL_SOCKET_IFNAME==eth1" in lines[0] + lines[1] and " ".join(lines).count("--nnodes") == 1
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")


def test_wrap_keeps_a_long_path_whole_unless_asked() -> None:
    path = "/very/long/path/to/some/directory/ddpkit-runs/20261204-101500-node0/rank0.log"
    assert wrap(f"see {path} now", 30) == ["see", path, "now"]
    broken = wrap(f"see {path}", 30, break_long_words=True, subsequent_indent="  ")
    assert all(display_width(line) <= 30 for line in broken)
    assert "".join(line.strip() for line in broken) == f"see{path}"


def test_wrap_indents_by_columns() -> None:
    lines = wrap("网卡 " * 20, 21, initial_indent="* ", subsequent_indent="  ")
    assert lines[0].startswith("* 网卡") and all(line.startswith("  网卡") for line in lines[1:])
    assert all(display_width(line) <= 21 for line in lines)
    assert wrap("", 10) == [] and wrap("   ", 10) == []


def test_table_aligns_cjk_and_colour_by_columns() -> None:
    lines = render.table_lines(("网卡", "状态", "detail"),
                               [("eth1", f"{RED}通过{RESET}", "主节点可达"),
                                ("eth0", "fail", "unreachable")], 100)
    for words in (("detail", "主节点可达", "unreachable"), ("状态", "通过", "fail")):
        # each column starts at the same display column in every row
        assert len({display_width(line[:line.index(w)]) for line, w in zip(lines, words)}) == 1


def test_a_table_wider_than_the_width_shrinks_its_widest_columns() -> None:
    rows = [("check", "ok", "ok", "ok", "ok", "rank 3: " + "all_reduce of 1 MiB mismatched " * 4),
            ("interface-used", "ok", "FAIL", "ok", "ok", "eth1 (10.0.0.2) on every rank")]
    headers = ("check", "r0@instance-a1b2c3d4", "r1@instance-a1b2c3d4", "r2@instance-e5f6",
               "r3@instance-e5f6", "detail")
    natural = render.table_lines(headers, rows, 1000)
    assert max(display_width(line) for line in natural) > 136
    for columns in (100, 80, 60):
        lines = render.table_lines(headers, rows, columns)
        assert max(display_width(line) for line in lines) <= columns
        assert len(lines) > len(rows) + 1  # the detail wrapped onto continuation lines
        assert any("…" in line for line in lines[:1])  # a long header is cut with the marker
        text = " ".join(line.strip() for line in lines)
        assert "FAIL" in text and "mismatched" in text
        if columns >= 80:  # the prose column wraps before a short column's word is broken
            assert "interface-used" in text


def test_a_table_that_fits_is_unchanged() -> None:
    lines = render.table_lines(("a", "bb"), [("1", "2"), ("333", "4")], 100)
    assert lines == ["a    bb", "1    2", "333  4"]


def test_console_width_is_100_when_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert Console(out=io.StringIO(), err=io.StringIO()).width == 100
    assert terminal_width(False) == 100
    monkeypatch.setenv("COLUMNS", "72")
    assert Console(out=io.StringIO(), err=io.StringIO()).width == 72
    assert Console(out=io.StringIO(), err=io.StringIO(), width=55).width == 55


def test_help_wraps_a_chinese_sentence_at_60_columns() -> None:
    formatter = HelpFormatter("ddpkit", width=58)
    formatter.add_text(CHINESE)
    formatter.add_text("一行\n接着一行")  # source lines of one CJK paragraph join without a space
    lines = formatter.format_help().splitlines()
    assert lines and all(display_width(line) <= 58 for line in lines)
    assert "".join(lines).replace(" ", "").startswith(CHINESE)
    assert "一行接着一行" in lines


def test_a_long_command_is_split_with_continuations_and_pastes_back() -> None:
    import shlex

    argv = ["/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes=2", "--node-rank=0",
            "--master-addr=10.0.0.2", "--log-dir=/root/my project/ddpkit-runs/x/torchrun",
            "train.py", "--lr", "0.1", "--name", "实验 一"] * 3
    lines = render.command_lines(shlex.join(argv), 60)
    assert len(lines) > 3 and all(display_width(line) <= 60 for line in lines)
    assert all(line.endswith(" \\") for line in lines[:-1]) and lines[1].startswith("      ")
    assert shlex.split(" ".join(line.removesuffix(" \\") for line in lines)) == argv
    assert render.command_lines("ddpkit test", 60) == ["  ddpkit test"]


def test_elide_keeps_both_ends_of_a_path() -> None:
    text = "  TORCH_FR_DUMP_TEMP_FILE=/root/project/ddpkit-runs/20261204-101828-node0/flight-recorder/rank_"
    cut = elide(text, 60)
    assert display_width(cut) == 60 and cut.startswith("  TORCH_FR_DUMP_TEMP_FILE=/r")
    assert cut.endswith("flight-recorder/rank_") and "…" in cut
    assert elide("短路径", 10) == "短路径" and display_width(elide("网卡" * 20, 11)) <= 11


def test_a_squeezed_column_wraps_its_cells_and_loses_nothing() -> None:
    path = "/tmp/pytest-of-root/pytest-157/test_show_text_is_a_table_with0/etc/nccl.conf:1"
    rows = [("NCCL_SOCKET_IFNAME", "eth1  # private network", path, "set in a file " * 6)]
    lines = render.table_lines(("NAME", "VALUE", "SOURCE", "NOTE"), rows, 80)
    assert all(display_width(line) <= 80 for line in lines) and len(lines) > 2
    start = lines[0].index("SOURCE")
    source = "".join(line[start:].split("  ")[0] for line in lines[1:])
    assert source == path  # broken after its slashes, every character kept
    assert all(piece.strip()[-1] in "/-_" for piece in
               [line[start:].split("  ")[0] for line in lines[1:]][:-1] if piece.strip())


def test_wrap_keeps_the_spaces_inside_a_line_as_textwrap_does() -> None:
    # a quoted source line keeps its "  # comment"; a line break drops the spaces it falls on
    text = "  rank 1 is at late.py:7 `time.sleep(1)  # late, not dead`"
    assert wrap(text, 100, initial_indent="ddpkit:") == [f"ddpkit:{text}"]
    lines = wrap(text, 30, initial_indent="ddpkit: ", subsequent_indent="ddpkit:   ")
    assert "`time.sleep(1)  #" in "\n".join(lines)
    assert not any(line.endswith(" ") for line in lines)
