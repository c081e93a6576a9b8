"""Running iproute2's ``ip`` with a deadline: the one way ddpkit asks the kernel about routes and
addresses (``ip -j route get``, ``ip -j addr show``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

IP_TIMEOUT_S = 5.0

RunIp = Callable[[Sequence[str]], str]
"""Runs an ``ip`` argv and returns its stdout; raises OSError (e.g. IpCommandError) on failure."""


class IpCommandError(OSError):
    """``ip`` ran and failed; ``stderr`` holds what it said (e.g. "Network is unreachable")."""

    def __init__(self, argv: Sequence[str], returncode: int, stderr: str) -> None:
        super().__init__(f"`{' '.join(argv)}` exited {returncode}: {stderr.strip()}")
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr


def run_ip_command(argv: Sequence[str]) -> str:
    """Run ``ip`` (iproute2) and return its stdout; OSError (IpCommandError) when it fails."""
    import subprocess

    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise IpCommandError(argv, -1, f"timed out after {IP_TIMEOUT_S:g} s") from exc
    if proc.returncode != 0:
        raise IpCommandError(argv, proc.returncode, proc.stderr)
    return proc.stdout
