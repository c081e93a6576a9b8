from __future__ import annotations

import subprocess
import sys

from ddpkit import __version__
from ddpkit.cli.command_table import COMMANDS
from ddpkit.errors import ExitCode


def test_version(run_cli) -> None:
    result = run_cli("--version")
    assert result.code == 0
    assert result.out.strip() == f"ddpkit {__version__}"


def test_overview_lists_every_command(run_cli) -> None:
    result = run_cli("--help")
    assert result.code == 0
    for name in COMMANDS:
        assert f"  {name}" in result.out


def test_unknown_command_is_a_usage_error_with_id(run_cli) -> None:
    result = run_cli("frobnicate")
    assert result.code == ExitCode.USAGE
    assert "error [unknown-command]" in result.err
    assert "fix:" in result.err


def test_unknown_global_option(run_cli) -> None:
    result = run_cli("--bogus")
    assert result.code == ExitCode.USAGE
    assert "bad-usage" in result.err


def test_python_dash_m_runs_the_same_cli() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ddpkit", "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"ddpkit {__version__}"
