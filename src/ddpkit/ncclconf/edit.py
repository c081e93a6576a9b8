"""Planning an nccl.conf edit: validate names and values, compute the new text and its diff.

A plan is data: what the file holds now, what it would hold, the changes and the diff, plus
warnings about the result (a value hidden by the environment, a file NCCL does not read). Writing
it is one call to :func:`apply_plan`; ``--dry-run`` simply does not make that call.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpkit.errors import ConfigError, EnvironmentProblem, UsageError
from ddpkit.i18n import _
from ddpkit.ncclconf.atomic import WriteResult, check_target, write_atomic
from ddpkit.ncclconf.effective import (
    ENV,
    SYSTEM_CONF,
    ConfSource,
    conf_files,
    load_sources,
    resolve_settings,
)
from ddpkit.ncclconf.file import (
    ConfFile,
    parse_conf,
    render_conf,
    unified_diff,
    with_values,
    without_keys,
)
from ddpkit.ncclconf.ifname import matching_interfaces, parse_ifname
from ddpkit.ncclconf.known import closest_names, known_variable, value_is_accepted
from ddpkit.ncclconf.problems import NcclConfWarning

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INTERFACE_VARIABLES = ("NCCL_SOCKET_IFNAME",)


@dataclass(frozen=True)
class Change:
    key: str
    old: str | None  # None: not set in this file before
    new: str | None  # None: removed

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class EditPlan:
    path: Path
    existed: bool
    old_text: str
    new_text: str
    changes: tuple[Change, ...]
    diff: str
    warnings: tuple[NcclConfWarning, ...] = ()

    @property
    def changed(self) -> bool:
        return self.old_text != self.new_text

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "existed": self.existed,
            "changed": self.changed,
            "changes": [c.to_dict() for c in self.changes],
            "diff": self.diff,
        }


def parse_assignment(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` from the command line -> (KEY, VALUE); UsageError ``bad-assignment``."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UsageError(
            "bad-assignment",
            _("{text!r} is not KEY=VALUE", text=text),
            _("write e.g. NCCL_SOCKET_IFNAME==eth1 (the value =eth1 is NCCL's exact-name form)"),
        )
    return key, value


def check_name_syntax(key: str) -> None:
    if not _NAME.match(key):
        raise ConfigError(
            "bad-variable-name", _("{key!r} is not a variable name", key=key),
            _("names are letters, digits and _, e.g. NCCL_DEBUG"),
        )


def check_name(key: str, *, force: bool) -> None:
    """Refuse names NCCL would not act on: non-``NCCL_`` names always, unknown ones without
    ``force`` (ids ``not-an-nccl-variable``, ``unknown-nccl-variable``, ``bad-variable-name``)."""
    check_name_syntax(key)
    if not key.startswith("NCCL_"):
        hint = (_("nccl.conf only holds NCCL_* variables; export {key} in the job's environment "
                  "instead (NCCL's file is too late)", key=key)
                if key.startswith("GLOO_") or key.startswith("TORCH_") else
                _("nccl.conf only holds NCCL_* variables"))
        raise ConfigError("not-an-nccl-variable", _("{key} is not an NCCL variable", key=key),
                          hint)
    variable = known_variable(key)
    if variable is None and not force:
        close = closest_names(key)
        hint = (_("did you mean {name}? pass --force to write a name ddpkit does not know",
                  name=close[0]) if close else
                _("pass --force to write a name ddpkit does not know"))
        raise ConfigError(
            "unknown-nccl-variable", _("{key} is not an NCCL variable ddpkit knows", key=key),
            hint,
            details={"name": key, "suggestions": list(close)},
        )
    if key == "NCCL_CONF_FILE" and not force:
        raise ConfigError(
            "conf-file-in-file",
            _("NCCL_CONF_FILE in a config file does not change which file NCCL reads"),
            _("export NCCL_CONF_FILE in the environment instead (or pass --force)"),
        )


def check_value(key: str, value: str, interface_names: Sequence[str], *, force: bool) -> None:
    """Refuse values NCCL would misread; check interface values against ``interface_names``."""
    if any(c in value for c in "\n\r\0"):
        raise ConfigError(
            "invalid-value", _("the value of {key} contains a line break or NUL", key=key),
            _("a value is one line of text"),
        )
    if force:
        return
    if value != value.strip() or value == "":
        raise ConfigError(
            "invalid-value",
            _("{key}={value!r}: NCCL keeps surrounding spaces, and an empty value means unset",
              key=key, value=value),
            _("write {line}", line=key + "=" + value.strip()) if value.strip()
            else _("use `unset {key}`", key=key),
        )
    variable = known_variable(key)
    if variable is not None and not value_is_accepted(variable, value):
        raise ConfigError(
            "invalid-value", _("{key}={value} is not one of {choices}", key=key, value=value,
                               choices=", ".join(variable.choices)),
            _("use one of: {choices} (or --force)", choices=", ".join(variable.choices)),
        )
    if key in _INTERFACE_VARIABLES:
        if parse_ifname(value) is None:
            raise ConfigError(
                "ifname-ignored",
                _("{key}={value!r}: NCCL ignores a value of one character", key=key, value=value),
                _("give an interface, e.g. NCCL_SOCKET_IFNAME==eth1"),
            )
        if not matching_interfaces(value, interface_names):
            local = ", ".join(sorted(interface_names)) or _("none")
            raise ConfigError(
                "interface-not-found",
                _("{key}={value} matches no interface on this machine (interfaces: {local})",
                  key=key, value=value, local=local),
                _("use a name `ddpkit nics` lists, e.g. NCCL_SOCKET_IFNAME==eth1 "
                  "(or --force when the file is for another machine)"),
                details={"value": value, "available": sorted(interface_names)},
            )


def read_text(path: Path) -> tuple[bool, str]:
    """(exists, text) of ``path``; bytes that are not UTF-8 survive a round trip."""
    check_target(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return False, ""
    except IsADirectoryError as exc:
        raise ConfigError("not-a-file", _("{path} is a directory", path=str(path)),
                          _("give a file path")) from exc
    except PermissionError as exc:
        raise EnvironmentProblem(
            "permission-denied", _("cannot read {path}: {reason}", path=str(path),
                                   reason=exc.strerror or ""),
            _("rerun as root (sudo), or choose a file you can read and write (--user / --file)"),
            details={"path": str(path)},
        ) from exc
    return True, raw.decode("utf-8", errors="surrogateescape")


def plan_edit(
    path: Path,
    *,
    updates: Mapping[str, str] | None = None,
    removals: Sequence[str] = (),
    current: tuple[bool, str] | None = None,
) -> EditPlan:
    """The plan for setting ``updates`` and removing ``removals`` in ``path`` (pure given
    ``current`` = (exists, text); read from disk when omitted). Names are not validated here."""
    existed, old_text = current if current is not None else read_text(path)
    old = parse_conf(old_text, str(path))
    new = old
    if updates:
        new = with_values(new, updates)
    if removals:
        new = without_keys(new, removals)
    new_text = render_conf(new)
    changes = _changes(old, new, [*(updates or {}), *removals])
    return EditPlan(path, existed, old_text, new_text, changes,
                    unified_diff(old_text, new_text, str(path)))


def _changes(old: ConfFile, new: ConfFile, keys: Sequence[str]) -> tuple[Change, ...]:
    out: list[Change] = []
    for key in dict.fromkeys(keys):
        before, after = old.get(key), new.get(key)
        if before != after:
            out.append(Change(key, before, after))
    return tuple(out)


def target_warnings(
    plan: EditPlan,
    env: Mapping[str, str],
    home: Path,
    etc: Path = SYSTEM_CONF,
    *,
    sources: Sequence[ConfSource] | None = None,
) -> tuple[NcclConfWarning, ...]:
    """What will stop the new file from taking effect: NCCL not reading it at all, or each
    changed name being hidden by the environment or a higher-priority file."""
    found: list[NcclConfWarning] = []
    target = plan.path.resolve()
    read_paths = [p.resolve() for p in conf_files(env, home, etc)]
    path = str(plan.path)
    if target not in read_paths:
        found.append(NcclConfWarning(
            "target-not-read",
            _("NCCL does not read {path} in this environment (it reads {files})", path=path,
              files=" then ".join(str(p) for p in conf_files(env, home, etc))),
            _("export {line} in the job's environment", line="NCCL_CONF_FILE=" + str(target)),
            path,
        ))
        return tuple(found)
    if sources is None:
        sources = load_sources(env, home, etc)
    new_conf = parse_conf(plan.new_text, path)
    confs: list[ConfFile | None] = []
    for source, source_path in zip(sources, read_paths):
        confs.append(new_conf if source_path == target else source.conf)
    settings = {s.name: s for s in resolve_settings(env, confs, defaults=False)}
    for change in plan.changes:
        if change.new is None:
            setting = settings.get(change.key)
            if setting is not None:
                found.append(NcclConfWarning(
                    "still-set-elsewhere",
                    _("{key} stays set to {value!r} by {origin}", key=change.key,
                      value=setting.value, origin=setting.origin),
                    _("remove it there too") if setting.source != ENV
                    else _("unset {key} in the environment", key=change.key),
                    setting.path, setting.line,
                ))
            continue
        setting = settings.get(change.key)
        if setting is None or (setting.path is not None
                               and Path(setting.path).resolve() == target):
            continue
        found.append(NcclConfWarning(
            "setting-shadowed",
            _("{key}={new} in {path} is hidden: {origin} sets {key}={value}", key=change.key,
              new=change.new, path=path, origin=setting.origin, value=setting.value),
            _("unset {key} in the environment", key=change.key) if setting.source == ENV
            else _("remove {key} from {path} (or set it there)", key=change.key,
                   path=setting.path),
            setting.path, setting.line,
        ))
    return tuple(found)


def apply_plan(
    plan: EditPlan, *, before_replace: Callable[[Path], None] | None = None
) -> WriteResult:
    """Write the plan's new text atomically (temp file, fsync, ``.bak``, rename, mode 0644)."""
    data = plan.new_text.encode("utf-8", errors="surrogateescape")
    return write_atomic(plan.path, data, before_replace=before_replace)
