"""The OpenSSH transport: argv lists for the system ``ssh`` client, quoting at one edge.

ddpkit never builds a shell string anywhere but :func:`remote_command`: every word of the remote
command (the python path, each argument, each environment value, the working directory) is quoted
there with :func:`shlex.quote`, so an argument containing ``;``, spaces, quotes, ``$(...)`` or a
newline reaches the remote program exactly as written. Host and user names are never quoted into
anything: they are validated (:mod:`ddpkit.launch.ssh.hostfile`) and passed to ``ssh`` as argv words
after ``--``.

``ssh`` runs with ``BatchMode=yes`` (never a password prompt that would hang the job) and a
``ConnectTimeout``; it reads the user's ``~/.ssh/config`` as always (or ``--ssh-config FILE``).
Within one job every host gets one connection (``ControlMaster``, see :mod:`.reuse`): the preflight
opens it, the node's session and node 0's route lookup ride on it.
ddpkit never turns off host-key checking: ``--ssh-option StrictHostKeyChecking=accept-new`` is the
user's choice to make.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ddpkit.errors import ConfigError, UsageError
from ddpkit.i18n import _
from ddpkit.launch.ssh.hostfile import Host

DEFAULT_SSH_CONNECT_TIMEOUT = 10.0
DEFAULT_SSH_PARALLEL = 32  # hosts connected to at once (the preflight; the job then reuses them)
CONTROL_PERSIST_S = 60  # a job's shared connection outlives its last session this long at most
SERVER_ALIVE_INTERVAL_S = 5
SERVER_ALIVE_COUNT = 3  # a silent connection is declared dead after 5 s x 3
SSH_FAILED = 255  # what ssh exits with when the connection itself failed
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPTION = re.compile(r"([A-Za-z][A-Za-z0-9]*)(?:=|\s+)(\S.*)")


@dataclass(frozen=True)
class SshSettings:
    """How to run ``ssh``: the user's ``-o`` options come first, so they win over ddpkit's."""

    connect_timeout: float = DEFAULT_SSH_CONNECT_TIMEOUT
    options: tuple[str, ...] = ()  # user's `-o` options, verbatim ("Key=Value")
    config_file: str | None = None  # `-F FILE`
    executable: str = "ssh"
    parallel: int = DEFAULT_SSH_PARALLEL  # at most this many hosts connected to at once
    control_dir: str | None = None  # where the job's shared connections live (None: no reuse)

    def __post_init__(self) -> None:
        if self.connect_timeout <= 0:
            raise UsageError("bad-timeout", _("--ssh-connect-timeout must be positive"),
                             _("e.g. --ssh-connect-timeout 10"))
        if self.parallel < 1:
            raise UsageError("bad-usage", _("--ssh-parallel must be at least 1"),
                             _("e.g. --ssh-parallel {count}", count=DEFAULT_SSH_PARALLEL))
        for option in self.options:
            check_ssh_option(option)


def check_ssh_option(option: str) -> str:
    """A ``-o`` value must be ``Key=Value`` (or ``Key Value``); UsageError ``bad-ssh-option``."""
    if not _OPTION.fullmatch(option.strip()) or "\n" in option:
        raise UsageError(
            "bad-ssh-option",
            _("--ssh-option {option!r} is not an ssh option of the form Key=Value",
              option=option),
            _("e.g. --ssh-option StrictHostKeyChecking=accept-new (see `man ssh_config`)"),
        )
    return option


def ssh_argv(host: Host, command: str, settings: SshSettings) -> list[str]:
    """The argv that runs the shell ``command`` (built by :func:`remote_command`) on ``host``."""
    argv = [settings.executable, "-T"]
    for option in settings.options:
        argv += ["-o", option]
    argv += [
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={max(1, round(settings.connect_timeout))}",
        "-o", f"ServerAliveInterval={SERVER_ALIVE_INTERVAL_S}",
        "-o", f"ServerAliveCountMax={SERVER_ALIVE_COUNT}",
    ]
    if settings.control_dir:
        argv += ["-o", "ControlMaster=auto", "-o", f"ControlPath={settings.control_dir}/%C",
                 "-o", f"ControlPersist={CONTROL_PERSIST_S}"]
    if settings.config_file:
        argv += ["-F", settings.config_file]
    if host.user:
        argv += ["-l", host.user]
    if host.port:
        argv += ["-p", str(host.port)]
    argv += ["--", host.name, command]
    return argv


def remote_command(argv: Sequence[str], *, cwd: str | None = None,
                   env: Mapping[str, str] | None = None) -> str:
    """The one place a shell command is built: ``cd -- DIR && exec env K=V ... ARGV...``.

    Every word is quoted with :func:`shlex.quote`; names in ``env`` must be plain variable names
    (ConfigError ``bad-variable-name``), and with ``env`` the program may not contain ``=`` (``env``
    would take it for an assignment).
    """
    if not argv:
        raise ValueError("remote_command needs a program to run")
    words = ["exec"]
    if env:
        words.append("env")
        for key, value in sorted(env.items()):
            check_env_name(key)
            words.append(shlex.quote(f"{key}={value}"))
        if "=" in argv[0]:
            raise ConfigError("bad-remote-program",
                              _("the remote program path {path!r} contains '='", path=argv[0]),
                              _("install python under a path without '=' or pass "
                                "--remote-python"))
    words.extend(shlex.quote(word) for word in argv)
    command = " ".join(words)
    if cwd:
        command = f"cd -- {shlex.quote(cwd)} && {command}"
    return command


def check_env_name(name: str) -> str:
    if not _ENV_NAME.fullmatch(name):
        raise ConfigError("bad-variable-name", _("{name!r} is not an environment variable name",
                                                 name=name),
                          _("use letters, digits and '_' (not starting with a digit)"))
    return name


def describe_ssh_failure(stderr_lines: Sequence[str]) -> str:
    """The most telling line ssh printed about a failed connection (or a generic phrase)."""
    meaningful = [line.strip() for line in stderr_lines if line.strip()]
    for line in reversed(meaningful):
        lowered = line.lower()
        if any(word in lowered for word in ("ssh:", "permission denied", "host key", "connection",
                                            "could not resolve", "timed out", "no route")):
            return line
    return meaningful[-1] if meaningful else _("ssh failed without saying why")
