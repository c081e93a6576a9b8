"""Which value of each NCCL variable a process started now gets, and where it comes from.

NCCL's order (``initEnv`` in NCCL's ``param.cc``): the process environment; then
``$NCCL_CONF_FILE`` when it is set and non-empty (NCCL >= 2.23), *otherwise* ``~/.nccl.conf``;
then ``/etc/nccl.conf``. Files are applied with ``setenv(name, value, 0)``: nothing already set
is replaced, so the environment beats both files, the first file beats ``/etc/nccl.conf``, and
within one file the first line of a name wins. NCCL finds ``~`` through the password database
(``getpwuid(getuid())->pw_dir``), not ``$HOME``; callers pass that directory as ``home``.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ddpkit.i18n import _
from ddpkit.ncclconf.file import ConfFile, line_problems, parse_conf
from ddpkit.ncclconf.known import important_variables
from ddpkit.ncclconf.problems import NcclConfWarning

SYSTEM_CONF = Path("/etc/nccl.conf")
USER_CONF_NAME = ".nccl.conf"

SettingSource = Literal["env", "file", "default"]
ENV: SettingSource = "env"
FILE: SettingSource = "file"
DEFAULT: SettingSource = "default"

ConfRole = Literal["NCCL_CONF_FILE", "user", "system"]
ROLE_CONF_FILE: ConfRole = "NCCL_CONF_FILE"
ROLE_USER: ConfRole = "user"
ROLE_SYSTEM: ConfRole = "system"


@dataclass(frozen=True)
class Shadowed:
    """A value NCCL will not use because a higher-priority source sets the same name."""

    value: str
    source: SettingSource  # env or file: a default shadows nothing
    path: str | None = None
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Setting:
    name: str
    value: str
    source: SettingSource
    path: str | None = None  # the file, when source == "file"
    line: int | None = None
    note: str = ""  # for defaults: what "unset" means to NCCL
    shadowed: tuple[Shadowed, ...] = ()

    @property
    def origin(self) -> str:
        if self.source == FILE:
            return f"{self.path}:{self.line}" if self.line is not None else str(self.path)
        return _("environment") if self.source == ENV else _("NCCL default")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "source": self.source,
            "path": self.path,
            "line": self.line,
            "note": self.note,
            "shadowed": [s.to_dict() for s in self.shadowed],
        }


@dataclass(frozen=True)
class ConfSource:
    """One file NCCL would read (or skip), and what is in it."""

    path: str
    role: ConfRole
    exists: bool
    conf: ConfFile | None = None  # None when missing or unreadable
    error: str | None = None  # why it could not be read

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "role": self.role,
            "exists": self.exists,
            "read": self.conf is not None,
            "error": self.error,
        }


@dataclass(frozen=True)
class EffectiveConfig:
    settings: tuple[Setting, ...]
    sources: tuple[ConfSource, ...]
    problems: tuple[NcclConfWarning, ...] = field(default=())  # malformed lines, by file

    def get(self, name: str) -> Setting | None:
        return next((s for s in self.settings if s.name == name), None)


def conf_file_from_env(env: Mapping[str, str]) -> str | None:
    """``$NCCL_CONF_FILE`` as NCCL uses it: None when unset or empty."""
    value = env.get("NCCL_CONF_FILE")
    return value if value else None


def conf_files(
    env: Mapping[str, str], home: Path, etc: Path = SYSTEM_CONF
) -> tuple[Path, ...]:
    """The files NCCL reads, highest priority first: ($NCCL_CONF_FILE | ~/.nccl.conf), etc."""
    override = conf_file_from_env(env)
    first = Path(override) if override is not None else home / USER_CONF_NAME
    return (first, etc)


def conf_roles(env: Mapping[str, str], home: Path, etc: Path = SYSTEM_CONF) -> tuple[ConfRole, ...]:
    return (ROLE_CONF_FILE if conf_file_from_env(env) else ROLE_USER, ROLE_SYSTEM)


def read_source(path: Path, role: ConfRole) -> ConfSource:
    """Read one candidate file the way NCCL would (a missing or unreadable file is skipped).

    Anything but a regular file is reported, never opened: reading a FIFO would block.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return ConfSource(str(path), role, exists=False)
    except OSError as exc:
        return ConfSource(str(path), role, exists=True, error=exc.strerror or str(exc))
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        return ConfSource(str(path), role, exists=True,
                          error=_("not a regular file (a FIFO, device or socket): not read"))
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return ConfSource(str(path), role, exists=False)
    except IsADirectoryError:
        return ConfSource(str(path), role, exists=True, error=_("is a directory"))
    except OSError as exc:
        return ConfSource(str(path), role, exists=True, error=exc.strerror or str(exc))
    text = raw.decode("utf-8", errors="surrogateescape")
    return ConfSource(str(path), role, exists=True, conf=parse_conf(text, str(path)))


def load_sources(
    env: Mapping[str, str], home: Path, etc: Path = SYSTEM_CONF
) -> tuple[ConfSource, ...]:
    paths = conf_files(env, home, etc)
    roles = conf_roles(env, home, etc)
    return tuple(read_source(p, r) for p, r in zip(paths, roles))


def resolve_settings(
    env: Mapping[str, str],
    confs: Sequence[ConfFile | None],
    *,
    defaults: bool = True,
) -> tuple[Setting, ...]:
    """Pure provenance: the value and source of every NCCL variable, sorted by name.

    ``confs`` are the files NCCL reads, highest priority first (None for one it cannot read).
    Every ``NCCL_*`` name in ``env`` is listed, every name any file sets (NCCL sets whatever a
    file says, ``NCCL_`` or not), and with ``defaults`` the important variables nothing sets.
    """
    candidates: dict[str, list[Shadowed]] = {}
    for name, value in env.items():
        if name.startswith("NCCL_"):
            candidates.setdefault(name, []).append(Shadowed(value, ENV))
    for conf in confs:
        if conf is None:
            continue
        for name, line in conf.effective().items():
            if name in env and not name.startswith("NCCL_"):
                # Set in the environment and not listed above: still beats the file.
                candidates.setdefault(name, []).append(Shadowed(env[name], ENV))
            candidates.setdefault(name, []).append(
                Shadowed(line.value or "", FILE, conf.path, line.number)
            )
    settings: list[Setting] = []
    for name, chain in candidates.items():
        unique = _dedupe(chain)
        winner, rest = unique[0], tuple(unique[1:])
        settings.append(
            Setting(name, winner.value, winner.source, winner.path, winner.line, shadowed=rest)
        )
    if defaults:
        for variable in important_variables():
            if variable.name not in candidates:
                settings.append(
                    Setting(variable.name, variable.default or "", DEFAULT,
                            note=variable.default_note)
                )
    return tuple(sorted(settings, key=lambda s: s.name))


def _dedupe(chain: list[Shadowed]) -> list[Shadowed]:
    out: list[Shadowed] = []
    for item in chain:
        if item not in out:
            out.append(item)
    return out


def load_effective(
    env: Mapping[str, str], home: Path, etc: Path = SYSTEM_CONF, *, defaults: bool = True
) -> EffectiveConfig:
    """Read the files and resolve: what ``nccl-conf show`` reports (without interface checks)."""
    sources = load_sources(env, home, etc)
    confs = [s.conf for s in sources]
    settings = resolve_settings(env, confs, defaults=defaults)
    problems: list[NcclConfWarning] = []
    seen_paths: set[str] = set()
    for source in sources:
        if source.conf is not None and source.path not in seen_paths:
            seen_paths.add(source.path)
            problems.extend(line_problems(source.conf))
    return EffectiveConfig(settings, sources, tuple(problems))


def effective_settings(
    env: Mapping[str, str], home: Path, etc: Path = SYSTEM_CONF
) -> tuple[Setting, ...]:
    """Every NCCL variable in effect for a process started with ``env`` now, sorted by name."""
    return load_effective(env, home, etc).settings
