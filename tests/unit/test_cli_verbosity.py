"""-q and -v: what a console shows of ddpkit's progress and of torch's own C++ log."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import pytest

from ddpkit.cli.command_table import build_parser
from ddpkit.cli.node.node_events import ConsoleEvents
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.errors import NetworkProblem, UsageError

RAW = "[W1204 10:00:39.218931516 socket.cpp:207] [c10d] The hostname ... err=-3"


def _console(verbosity: str) -> Console:
    return Console(out=io.StringIO(), err=io.StringIO(), color=False,
                   verbosity=verbosity)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["launch", "test", "bench", "doctor", "join"])
def test_every_command_that_runs_torch_takes_both_flags(name: str) -> None:
    parser, _ = build_parser(name, _console("normal"))
    tail = {"launch": ["train.py"], "join": ["ddpk://x"]}.get(name, [])
    assert parser.parse_args(["-q", *tail]).quiet and parser.parse_args(["--verbose", *tail]).verbose
    with pytest.raises(UsageError, match="not allowed with"):
        parser.parse_args(["-q", "-v", *tail])


def test_quiet_keeps_results_and_errors_only() -> None:
    console = _console("quiet")
    render.log(console, "ddpkit: waiting for the master")
    render.warn(console, "something minor")
    render.result(console, "ddpkit: node 0 finished in 3.0 s")
    render.error(console, NetworkProblem("master-unreachable", "no master", "start it"),
                 as_json=False)
    assert console.err.getvalue().splitlines() == [  # type: ignore[attr-defined]
        "ddpkit: node 0 finished in 3.0 s", "error [master-unreachable]: no master",
        "  fix: start it",
        "  more: https://ddpkit.github.io/errors#master-unreachable (offline: `ddpkit explain",
        "  master-unreachable`)"]


@pytest.mark.parametrize("verbosity, shown", [
    ("normal", ["torch warning (x.cpp): odd"]), ("quiet", ["torch warning (x.cpp): odd"]),
    ("verbose", [RAW, "[W1204 10:00:39.0 x.cpp:1] odd"])])
def test_torchs_lines_are_raw_only_with_verbose(verbosity: str, shown: list[str]) -> None:
    console = _console(verbosity)
    events = ConsoleEvents(console)
    events.torch_internal(RAW, None)  # folded
    events.torch_internal("[W1204 10:00:39.0 x.cpp:1] odd", "torch warning (x.cpp): odd")
    assert console.out.getvalue().splitlines() == shown  # type: ignore[attr-defined]


PROBE = textwrap.dedent("""
    import datetime, os, sys
    from ddpkit.cli.torch_import import import_torch
    import_torch(sys.argv[1])
    assert "TORCH_CPP_LOG_LEVEL" not in os.environ, "left in this process's environment"
    from torch.distributed import TCPStore
    try:
        TCPStore("127.0.0.1", 1, None, False, datetime.timedelta(seconds=1), wait_for_workers=False)
    except RuntimeError:
        print("failed as expected")
""")


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("verbosity", ["normal", "verbose"])
def test_ddpkits_own_store_clients_log_no_cpp_lines_unless_verbose(verbosity: str) -> None:
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("TORCH_")}
    done = subprocess.run([sys.executable, "-c", PROBE, verbosity], capture_output=True,
                          text=True, timeout=100, env=env)
    assert done.returncode == 0 and "failed as expected" in done.stdout, done.stderr[-2000:]
    cpp = [line for line in done.stderr.splitlines() if "socket.cpp" in line or "frame #" in line]
    assert (cpp != []) == (verbosity == "verbose"), done.stderr[-2000:]
