"""Shared fixtures: an in-process CLI runner with captured I/O, an isolated environment, free ports."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from ddpkit.cli.main import main
from ddpkit.cli.output.console import Console
from ddpkit.i18n import use_language
from ports import free_port

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> dict:  # type: ignore[type-arg]
        import json

        return json.loads(self.out)


def _run_cli(*argv: str) -> CliResult:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Console(out=out, err=err, color=False))
    return CliResult(code, out.getvalue(), err.getvalue())


@pytest.fixture
def run_cli():  # type: ignore[no-untyped-def]
    """Run ``ddpkit ARGV...`` in this process and capture stdout/stderr."""
    return _run_cli


def run_ddpkit_subprocess(
    *argv: str, env: dict[str, str] | None = None, timeout: float = 120, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    """Run the real ``python -m ddpkit`` in a child process (with a timeout)."""
    return subprocess.run(
        [sys.executable, "-m", "ddpkit", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env if env is not None else clean_env(),
        **kwargs,  # type: ignore[arg-type]
    )


# A scheduler's variables would give ddpkit a cluster shape (ddpkit.launch.schedulers).
SCHEDULER_VARS = ("SLURM_", "SKYPILOT_", "PRIMARY_ADDR", "MASTER_ADDR")


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any NCCL_*/GLOO_*/TORCH_*/PET_* that could leak in."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NCCL_", "GLOO_", "TORCH_", "PET_", "MASTER_", "DDPKIT_", *SCHEDULER_VARS))
    }
    env.update(extra or {})
    return env


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No NCCL_*/GLOO_*/TORCH_* (nor a scheduler's layout) from the developer's shell reaches a
    test."""
    for key in list(os.environ):
        if key.startswith(("NCCL_", "GLOO_", "PET_", "DDPKIT_", *SCHEDULER_VARS)):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)  # output is laid out for 100 columns in tests
    yield


OUTPUT_COLUMNS = 100  # human output when not a terminal (ddpkit.cli.output.console)
# torch's own C++ log lines and traces: not laid out by ddpkit (keeping them off the console
# without -v is the other half of issue 21, tested on its own)
TORCH_LOG_LINES = ("[W", "[I", "[E", "frame #", "Exception raised from")


def wide_lines(*texts: str, columns: int = OUTPUT_COLUMNS, skip: tuple[str, ...] = ()) -> list[str]:
    """Lines of human output wider than ``columns`` display columns, with their width; lines that
    start with one of ``skip`` (a rank's own output passed through) are not ddpkit's to fit."""
    from ddpkit.cli.output.width import display_width

    return [f"{display_width(line)}: {line}" for text in texts for line in text.splitlines()
            if display_width(line) > columns and not line.lstrip().startswith(skip)]


@pytest.fixture
def assert_fits():  # type: ignore[no-untyped-def]
    """``assert_fits(out, err, ...)``: every line fits 100 display columns (issue 21)."""
    def check(*texts: str, columns: int = OUTPUT_COLUMNS, skip: tuple[str, ...] = ()) -> None:
        wide = wide_lines(*texts, columns=columns, skip=skip + TORCH_LOG_LINES)
        assert not wide, f"{len(wide)} line(s) wider than {columns} columns:\n" + "\n".join(wide)

    return check




@pytest.fixture
def tcp_port() -> int:
    """A TCP port free a moment ago, outside the kernel's ephemeral range (tests/ports.py)."""
    return free_port()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_root = pytest.mark.skip(reason="needs root (network namespaces)")
    has_cuda = _has_cuda()
    skip_gpu = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "root" in item.keywords and not IS_ROOT:
            item.add_marker(skip_root)
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(skip_gpu)


def _has_cuda() -> bool:
    # Cheap: look for the driver instead of importing torch in every test session.
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia/version")


@pytest.fixture
def chinese() -> Iterator[None]:
    """ddpkit's messages in Chinese for the test, English again after it (issue 23)."""
    use_language("zh")
    try:
        yield
    finally:
        use_language("en")
