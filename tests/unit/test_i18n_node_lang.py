"""The language reaches the other nodes: every command ddpkit builds for another node (the printed
peer commands, the ssh fan-out, a join token's job, the printed `ddpkit join` line) carries
``--lang zh`` while this run speaks Chinese, and nothing extra in English."""

from __future__ import annotations

import io

from ddpkit.cli.command_table import build_parser
from ddpkit.cli.job.job_events import JobConsoleEvents
from ddpkit.cli.output.console import Console
from ddpkit.launch.job import JobSpec, node_argv
from ddpkit.launch.join.tokens import new_token

SPEC = JobSpec(command="launch", nnodes=2, entry=("train.py", "--lr", "0.1"))


def test_english_node_commands_name_no_language() -> None:
    assert "--lang" not in node_argv(SPEC, 1, "10.0.0.2")


def test_chinese_node_commands_pass_the_language_before_the_script(chinese: None) -> None:
    argv = node_argv(SPEC, 1, "10.0.0.2")
    assert argv[:3] == ["launch", "--lang", "zh"]
    assert argv[-3:] == ["train.py", "--lr", "0.1"]  # the script's own arguments untouched
    parsed = build_parser("launch")[0].parse_args(argv[1:])  # the node (or a joiner) reads it
    assert parsed.lang == "zh" and parsed.script == "train.py" and parsed.nnodes == 2


def test_the_printed_join_line_passes_the_language(chinese: None) -> None:
    err = io.StringIO()
    token = new_token("10.0.0.2", 29400)
    JobConsoleEvents(Console(out=io.StringIO(), err=err, color=False, width=200)).token_ready(
        token, 1)
    assert f"ddpkit join --lang zh {token}" in err.getvalue()
