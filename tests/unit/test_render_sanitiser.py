"""No terminal control sequence that came from outside reaches stdout or stderr (issue 32): every
renderer entry, and every path that quotes outside text (a rank's output and exception in the
failure summary, a worker's outcome read from the job store, a joining node's host name, a file
name in ``doctor --log``), fed CSI, OSC 52, BEL, C1 controls and bidi overrides."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ddpkit.cli.job.job_events import JobConsoleEvents
from ddpkit.cli.node.node_events import ConsoleEvents
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.errors import JobFailed
from ddpkit.i18n import _, use_language
from ddpkit.launch.join.sides import JoinedNode
from ddpkit.launch.outcomes import job_summary, outcome_from_error

HOSTILE = ("\x1b]52;c;ZXZpbA==\x07"  # OSC 52: write the clipboard
           "\x1b[2J\x1b[1;1H"  # CSI: clear the screen, move the cursor
           "\x9b31m"  # 8-bit CSI
           "\x9d0;title\x9c"  # 8-bit OSC with ST
           "\u202eevil\u202c\u2066x\u2069"  # bidi override and isolate
           "\ufeff"  # a byte-order mark (a Windows file's first bytes, or files joined)
           "\x07\x85\r")  # BEL, NEL (C1), carriage return
# what must never be written: C0 but tab and newline, DEL, C1, bidi overrides and isolates, BOMs
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ufeff]")


def _console(color: bool = False) -> Console:
    return Console(out=io.StringIO(), err=io.StringIO(), color=color, width=100)


def _written(console: Console) -> str:
    out, err = console.out, console.err
    assert isinstance(out, io.StringIO) and isinstance(err, io.StringIO)
    return out.getvalue() + err.getvalue()


def _assert_clean(text: str) -> None:
    assert "ZXZpbA==" not in text or "\x1b]52" not in text
    assert not FORBIDDEN.search(text), repr(FORBIDDEN.findall(text))


@pytest.fixture(params=["en", "zh"])
def language(request: pytest.FixtureRequest) -> str:
    use_language(request.param)
    yield request.param
    use_language("en")


def test_every_renderer_entry_cleans_outside_values_and_strings(language: str) -> None:
    text = _("node {rank} ({host}) failed first: {how}", rank=1, host=HOSTILE, how=HOSTILE)
    console = _console()
    for value in (text, HOSTILE, "plain " + HOSTILE):
        render.line(console, value)
        render.wrapped(console, value)
        render.wrapped(console, value, to_err=True, keep=True)
        render.clipped(console, value)
        render.clipped(console, value, middle=True, to_err=True)
        render.command(console, value)
        render.log(console, value)
        render.result(console, value)
        render.status(console, value, keep=True)
        render.warn(console, value)
        render.table(console, ["host", "state"], [[value, value]], title=value)
        render.error(console, JobFailed("job-failed", value, value), as_json=False)
    written = _written(console)
    _assert_clean(written)
    assert "evil" in written  # the text itself is kept, only the controls go


def test_colours_are_ddpkits_own_only() -> None:
    console = _console(color=True)
    render.error(console, JobFailed("job-failed", _("{x}", x=HOSTILE), HOSTILE), as_json=False)
    render.table(console, ["a"], [[render.style(console, HOSTILE, "bold")]])
    render.warn(console, HOSTILE)
    written = _written(console)
    assert "\x1b[31;1m" in written  # the error label's colour survives
    without_colours = re.sub(r"\x1b\[[0-9;]*m", "", written)
    _assert_clean(without_colours)
    assert "\x1b[2J" not in written and "\x1b]52" not in written


def test_the_json_document_escapes_them() -> None:
    console = _console()
    render.error(console, JobFailed("job-failed", _("{x}", x=HOSTILE), "fix"), as_json=True)
    out = console.out
    assert isinstance(out, io.StringIO)
    _assert_clean(out.getvalue())
    assert json.loads(out.getvalue())["error"]["message"] == HOSTILE


def test_rank_output_and_node_lines_are_cleaned(language: str) -> None:
    console = _console()
    events = ConsoleEvents(console)
    events.output("step 1 " + HOSTILE)
    events.waiting(_("waiting for {what}", what=HOSTILE))
    events.warned(_("{what}", what=HOSTILE))
    _assert_clean(_written(console))


def test_a_workers_outcome_from_the_store_and_its_host_name_are_cleaned(language: str) -> None:
    """Token mode: what a worker wrote in the job store (its error, its rank's exception and
    last lines, its host name) quoted by the master."""
    error = {"id": "job-failed", "message": "Its last output: a " + HOSTILE + " | b",
             "details": {"root_cause": {"rank": 2, "local_rank": 0, "exitcode": 1},
                         "root_end": {"cause": True, "exception": {"text": "ValueError: "
                                                                   + HOSTILE}}}}
    outcome = outcome_from_error(error, node_rank=1, host="gpu-1" + HOSTILE)
    console = _console()
    events = JobConsoleEvents(console)
    events.node_finished(outcome)
    events.joined(JoinedNode(1, "gpu-1" + HOSTILE, "10.0.0.2" + HOSTILE, "eth0" + HOSTILE), 2, 2)
    events.node_line(type("Node", (), {"label": "node1"})(), HOSTILE)  # type: ignore[arg-type]
    summary = job_summary([outcome])
    assert HOSTILE in summary  # the English value keeps what was received (for --json)
    render.error(console, JobFailed("job-failed", summary, "fix"), as_json=False)
    written = _written(console)
    _assert_clean(written)
    assert "ValueError: " in written


def test_doctor_log_quotes_a_hostile_file_name_cleaned(tmp_path: Path) -> None:
    name = tmp_path / ("rank0" + HOSTILE.replace("\x00", "") + ".log")
    name.write_text("Traceback (most recent call last):\n  File \"t.py\", line 1\n"
                    "ValueError: boom " + HOSTILE + "\n")
    env = {**os.environ, "COLUMNS": "100"}
    done = subprocess.run([sys.executable, "-m", "ddpkit", "doctor", "--log", str(name)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert "rank0" in done.stdout + done.stderr, done.stderr[-2000:]
    _assert_clean(done.stdout + done.stderr)


@pytest.mark.parametrize(("raw", "shown"), [
    ("step 1\r\n", "step 1\n"),  # a CRLF line end keeps its line
    ("evil.sh\rtrain.log", "evil.shtrain.log"),  # what a carriage return would hide is shown
    ("ok \x1b[32mgreen\x1b[0m", "ok green"),
    ("two\nlines", "two\nlines"),
])
def test_plain_keeps_the_text_and_drops_the_controls(raw: str, shown: str) -> None:
    from ddpkit.plain_text import plain

    assert plain(raw) == shown


def test_quoted_material_with_tabs_fits_the_width() -> None:
    # a tab-separated log line (Envoy's debug log, a container runtime's) quoted as evidence: a
    # tab takes up to 8 columns on a terminal, so each one is shown as a space before the cut
    console = _console()
    quoted = "2022-07-19T18:01:59.211667Z\tdebug\tenvoy upstream\t" + "membership update " * 8
    render.clipped(console, quoted)
    written = _written(console).rstrip("\n")
    assert "\t" not in written and "debug envoy upstream" in written
    assert len(written.expandtabs()) <= 100
