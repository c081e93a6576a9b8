"""``ddpkit doctor --nnodes``: bad flags fail at once with a usage error, before torch is loaded,
and the other doctor modes are unchanged by the new flags."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from ddpkit.errors import ExitCode

RunCli = Callable[..., Any]


@pytest.mark.parametrize("argv, words", [
    (["--nnodes", "1", "--master-addr", "127.0.0.1"], "bad-nnodes]: --nnodes 1: cluster mode needs 2"),
    (["--nnodes", "2", "--node-rank", "2", "--master-addr", "127.0.0.1"],
     "node-rank-out-of-range]: --node-rank 2 is not in 0...1"),
    (["--nnodes", "2", "--node-rank", "-1", "--master-addr", "127.0.0.1"],
     "node-rank-out-of-range]: --node-rank -1 is not in 0...1"),
    (["--nnodes", "2", "--node-rank", "1"], "missing-master-addr]: cluster mode needs --master-addr"),
    (["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", "0"],
     "bad-port]: --master-port 0 is not a port"),
    (["--nnodes", "2", "--master-addr", "127.0.0.1", "--timeout", "5"], "bad-timeout]: --timeout 5"),
    (["--node-rank", "1", "--master-addr", "127.0.0.1"], "bad-usage]: --node-rank needs --nnodes"),
    (["--nnodes", "2", "--log", "x.log"], "bad-usage]: --log cannot be combined"),
])
def test_bad_cluster_flags_are_usage_errors(run_cli: RunCli, argv: list[str], words: str) -> None:
    result = run_cli("doctor", *argv)
    assert result.code == ExitCode.USAGE, result.err
    assert f"error [{words}" in result.err


def test_usage_errors_do_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from ddpkit.cli.main import main\n"
        "rc = main(['doctor', '--nnodes', '1', '--master-addr', '127.0.0.1'])\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == ExitCode.USAGE, proc.stderr


def test_torchrun_spellings_are_accepted(run_cli: RunCli) -> None:
    result = run_cli("doctor", "--nnodes", "2", "--node_rank", "5", "--master_addr", "127.0.0.1")
    assert result.code == ExitCode.USAGE and "--node-rank 5" in result.err


def test_help_documents_cluster_mode(run_cli: RunCli) -> None:
    result = run_cli("doctor", "--help")
    assert "--nnodes" in result.out and "--timeout" in result.out
