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


def test_a_store_handshake_left_running_ends_the_process_without_interpreter_shutdown() -> None:
    """With a handshake thread still inside torch's store client, the CLI exits with its own code
    through os._exit (no atexit handlers, no interpreter shutdown that would abort the process);
    without one it exits normally."""
    import subprocess
    import sys

    code = (
        "import atexit, sys, threading, time\n"
        "import torch\n"
        "from ddpkit.launch.store_client import HANDSHAKE_THREAD\n"
        "from ddpkit.cli import main as cli\n"
        "atexit.register(lambda: print('interpreter shutdown ran', flush=True))\n"
        "if sys.argv[1] == 'pending':\n"
        "    threading.Thread(target=time.sleep, args=(30,), daemon=True,\n"
        "                     name=HANDSHAKE_THREAD).start()\n"
        "sys.argv = ['ddpkit', 'frobnicate']\n"
        "cli.entry()\n"
    )
    for mode, shutdown in (("pending", False), ("none", True)):
        done = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2, done.stderr  # the usage error's code either way
        assert ("interpreter shutdown ran" in done.stdout) is shutdown, (mode, done.stdout)
