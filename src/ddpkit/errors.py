"""Every error a user can cause or meet, with a stable id, a hint and an exit code.

Library code raises these; only :mod:`ddpkit.cli.main` turns them into output and an exit status.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """Named process exit codes: the only place their numbers are decided."""

    OK = 0
    FAILURE = 1  # a check failed, a job failed, a finding of severity error
    USAGE = 2  # bad flags or arguments
    CONFIG = 3  # bad input: a file, an interface name, a value that cannot work here
    ENVIRONMENT = 4  # the machine lacks something: a permission, a tool, root
    NETWORK = 5  # a peer or master cannot be reached, a port is taken
    JOB_FAILED = 6  # workers ran and one of them failed
    TIMEOUT = 7  # something did not finish within its deadline
    INTERRUPTED = 130  # Ctrl-C / SIGTERM


class DdpkitError(Exception):
    """A failure the user can act on.

    ``error_id`` is kebab-case and stable (tests and docs refer to it); ``message`` is one line naming
    the cause; ``hint`` says what to do about it.
    """

    exit_code: ExitCode = ExitCode.FAILURE

    def __init__(
        self,
        error_id: str,
        message: str,
        hint: str = "",
        *,
        exit_code: ExitCode | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.error_id = error_id
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code
        self.details: dict[str, Any] = dict(details or {})

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.error_id,
            "message": self.message,
            "hint": self.hint,
            "exit_code": int(self.exit_code),
            "details": self.details,
        }


class UsageError(DdpkitError):
    """Flags or arguments that do not make sense together."""

    exit_code = ExitCode.USAGE


class ConfigError(DdpkitError):
    """Input that cannot work on this machine: unknown interface, malformed file, bad value."""

    exit_code = ExitCode.CONFIG


class EnvironmentProblem(DdpkitError):
    """The machine lacks something ddpkit needs: root, a tool, a permission."""

    exit_code = ExitCode.ENVIRONMENT


class NetworkProblem(DdpkitError):
    """A peer, master or port cannot be used."""

    exit_code = ExitCode.NETWORK


class JobFailed(DdpkitError):
    """Workers ran and at least one failed."""

    exit_code = ExitCode.JOB_FAILED


class DeadlineExceeded(DdpkitError):
    """Something did not finish in time."""

    exit_code = ExitCode.TIMEOUT


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, after ddpkit stopped what it ran; ``str()`` says what was stopped."""
