"""nccl.conf parsing exactly as NCCL's setEnvFile reads it, byte-exact rendering, in-place edits."""

from __future__ import annotations

import pytest

from ddpkit.ncclconf.file import (
    ASSIGNMENT,
    BLANK,
    COMMENT,
    IGNORED,
    line_problems,
    parse_conf,
    render_conf,
    unified_diff,
    with_values,
    without_keys,
)

# The seed page's FAQ fix, verbatim in shape: an inline comment after the value.
SEED_LINE = "NCCL_SOCKET_IFNAME=eth1  # 网卡名称更换您自己的"

ROUND_TRIP_CASES = [
    "",
    "\n",
    "NCCL_DEBUG=INFO",
    "NCCL_DEBUG=INFO\n",
    "# only a comment\n\n\n",
    "A=1\r\nB=2\r\n",
    "  leading spaces=1\n\tNCCL_X = y \nno equals sign here\n",
    f"# header\n{SEED_LINE}\nNCCL_IB_DISABLE=1\n# trailer",
    "NCCL_SOCKET_IFNAME==eth1\nNCCL_SOCKET_IFNAME=^docker,lo\n",
    "weird\x0bvertical tab and \u2028 separator=1\n",
]


@pytest.mark.parametrize("text", ROUND_TRIP_CASES)
def test_render_of_parse_is_byte_exact(text: str) -> None:
    assert render_conf(parse_conf(text)) == text


def test_non_utf8_bytes_survive_a_round_trip() -> None:
    raw = b"# caf\xe9 latin-1 comment\nNCCL_DEBUG=WARN\n"
    text = raw.decode("utf-8", errors="surrogateescape")
    out = render_conf(with_values(parse_conf(text), {"NCCL_DEBUG": "INFO"}))
    assert out.encode("utf-8", errors="surrogateescape") == b"# caf\xe9 latin-1 comment\nNCCL_DEBUG=INFO\n"


def test_lines_are_split_like_nccl_only_on_newline() -> None:
    conf = parse_conf("A=1\x0bB=2\nC=3\r\n")
    assert [(line.key, line.value) for line in conf.lines] == [("A", "1\x0bB=2"), ("C", "3\r")]


def test_classification_follows_nccl() -> None:
    conf = parse_conf("# c\n   # indented comment=1\n\n  \nNCCL_X=a=b\nno equals\n=bare\n")
    kinds = [line.kind for line in conf.lines]
    assert kinds == [COMMENT, COMMENT, BLANK, BLANK, ASSIGNMENT, IGNORED, ASSIGNMENT]
    nccl_x = conf.lines[4]
    assert (nccl_x.key, nccl_x.value) == ("NCCL_X", "a=b")  # split at the first '=' only
    assert conf.lines[6].key == ""


def test_name_and_value_are_not_trimmed() -> None:
    conf = parse_conf("NCCL_DEBUG = INFO\n")
    line = conf.lines[0]
    assert (line.key, line.value) == ("NCCL_DEBUG ", " INFO")
    assert conf.get("NCCL_DEBUG") is None


def test_first_line_of_a_name_wins_like_setenv_without_overwrite() -> None:
    conf = parse_conf("NCCL_DEBUG=WARN\nNCCL_DEBUG=INFO\n")
    assert conf.get("NCCL_DEBUG") == "WARN"
    assert conf.effective()["NCCL_DEBUG"].number == 1


def test_set_updates_in_place_and_keeps_every_other_line() -> None:
    text = "# keep me\nNCCL_DEBUG=WARN   \n\n# and me\nNCCL_IB_DISABLE=1\nother junk\n"
    new = render_conf(with_values(parse_conf(text), {"NCCL_DEBUG": "INFO"}))
    assert new == "# keep me\nNCCL_DEBUG=INFO\n\n# and me\nNCCL_IB_DISABLE=1\nother junk\n"


def test_set_appends_new_keys_in_given_order() -> None:
    new = render_conf(with_values(parse_conf("# x\n"), {"NCCL_B": "2", "NCCL_A": "1"}))
    assert new == "# x\nNCCL_B=2\nNCCL_A=1\n"


def test_append_to_a_file_without_final_newline_starts_a_new_line() -> None:
    new = render_conf(with_values(parse_conf("NCCL_DEBUG=WARN"), {"NCCL_IB_DISABLE": "1"}))
    assert new == "NCCL_DEBUG=WARN\nNCCL_IB_DISABLE=1\n"


def test_in_place_update_keeps_a_missing_final_newline() -> None:
    new = render_conf(with_values(parse_conf("# c\nNCCL_DEBUG=WARN"), {"NCCL_DEBUG": "INFO"}))
    assert new == "# c\nNCCL_DEBUG=INFO"


def test_set_on_empty_file() -> None:
    assert render_conf(with_values(parse_conf(""), {"NCCL_DEBUG": "INFO"})) == "NCCL_DEBUG=INFO\n"


def test_set_drops_dead_duplicates_of_the_same_key() -> None:
    text = "NCCL_DEBUG=WARN\n# between\nNCCL_DEBUG=TRACE\n"
    new = render_conf(with_values(parse_conf(text), {"NCCL_DEBUG": "INFO"}))
    assert new == "NCCL_DEBUG=INFO\n# between\n"


def test_unset_removes_every_line_of_the_key() -> None:
    # Removing only the first would make the second one NCCL's value.
    text = "NCCL_DEBUG=WARN\n# c\nNCCL_DEBUG=INFO\nNCCL_IB_DISABLE=1\n"
    conf = without_keys(parse_conf(text), ["NCCL_DEBUG"])
    assert render_conf(conf) == "# c\nNCCL_IB_DISABLE=1\n"
    assert conf.get("NCCL_DEBUG") is None
    assert [line.number for line in conf.lines] == [1, 2]


def test_unset_of_a_commented_key_leaves_the_comment() -> None:
    text = "#NCCL_DEBUG=INFO\nNCCL_DEBUG=WARN\n"
    assert render_conf(without_keys(parse_conf(text), ["NCCL_DEBUG"])) == "#NCCL_DEBUG=INFO\n"


def test_unified_diff_shows_the_change_and_is_empty_without_one() -> None:
    diff = unified_diff("A=1\nB=2\n", "A=1\nB=3\n", "/etc/nccl.conf")
    assert "-B=2\n" in diff and "+B=3\n" in diff and " A=1\n" in diff
    assert "/etc/nccl.conf" in diff
    assert unified_diff("A=1\n", "A=1\n", "x") == ""


def test_unified_diff_marks_a_missing_final_newline() -> None:
    diff = unified_diff("A=1", "A=1\nB=2\n", "x")
    assert "\\ No newline at end of file" in diff


def _ids(text: str) -> list[tuple[str, int | None]]:
    return [(p.id, p.line) for p in line_problems(parse_conf(text, "/etc/nccl.conf"))]


def test_the_seed_pages_inline_comment_is_flagged() -> None:
    problems = line_problems(parse_conf(f"{SEED_LINE}\n", "/etc/nccl.conf"))
    assert [p.id for p in problems] == ["conf-inline-comment"]
    problem = problems[0]
    assert problem.message.startswith("/etc/nccl.conf:1: ")
    assert "'eth1'" in problem.message  # what was meant
    assert (problem.path, problem.line) == ("/etc/nccl.conf", 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NCCL_DEBUG = INFO\n", [("conf-key-whitespace", 1)]),
        ("export NCCL_DEBUG=INFO\n", [("conf-line-malformed", 1)]),
        ("=INFO\n", [("conf-line-malformed", 1)]),
        ("NCCL-DEBUG=INFO\n", [("conf-line-malformed", 1)]),
        ("NCCL_DEBUG=INFO \n", [("conf-value-whitespace", 1)]),
        ('NCCL_SOCKET_IFNAME="eth1"\n', [("conf-value-quoted", 1)]),
        ("NCCL_DEBUG=INFO\r\n", [("conf-crlf", 1)]),
        ("# c\nNCCL_DEBUG=INFO\nNCCL_DEBUG=WARN\n", [("conf-duplicate-key", 3)]),
        ("NCCL_DEBUG INFO\n", [("conf-line-ignored", 1)]),
        ("GLOO_SOCKET_IFNAME=eth1\n", [("conf-non-nccl-key", 1)]),
        ("NCCL_CONF_FILE=/x\n", [("conf-file-in-file", 1)]),
        ("NCCL_SOCKET_IFNAMES=eth1\n", [("unknown-nccl-variable", 1)]),
        ("# NCCL_DEBUG = INFO\n\nNCCL_DEBUG=INFO\nNCCL_SOCKET_IFNAME==eth1\n", []),
    ],
)
def test_line_problems(text: str, expected: list[tuple[str, int]]) -> None:
    assert _ids(text) == expected


def test_unknown_name_in_a_file_suggests_the_close_one() -> None:
    (problem,) = line_problems(parse_conf("NCCL_SOCKET_IFNAMES=eth1\n", "f"))
    assert "NCCL_SOCKET_IFNAME" in problem.hint


def test_whitespace_key_hint_gives_the_fixed_line() -> None:
    (problem,) = line_problems(parse_conf("NCCL_DEBUG =INFO\n", "f"))
    assert "NCCL_DEBUG=" in problem.hint
