"""Warnings about NCCL settings that will not do what was meant on this machine.

Pure functions over :mod:`ddpkit.ncclconf.effective` results and the local interface list; the
caller gathers the facts (files, interfaces, traps) and passes them in. Warning ids are listed in
docs/nccl-conf.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ddpkit.i18n import _
from ddpkit.ncclconf.effective import (
    DEFAULT,
    ENV,
    USER_CONF_NAME,
    ConfSource,
    Setting,
    conf_file_from_env,
)
from ddpkit.ncclconf.ifname import (
    exact_spec,
    matching_interfaces,
    overmatched,
    padded_tokens,
    parse_ifname,
)
from ddpkit.ncclconf.known import closest_names, known_variable, value_is_accepted
from ddpkit.ncclconf.problems import NcclConfWarning

MAX_SOCKET_THREADS = 16
MAX_SOCKETS_TOTAL = 64  # NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD


class NicLike(Protocol):
    """What these checks need of :class:`ddpkit.net.interfaces.Nic`."""

    @property
    def name(self) -> str: ...


class TrapLike(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def message(self) -> str: ...


N = TypeVar("N", bound=NicLike)
TrapFinder = Callable[[Any, Sequence[Any]], Sequence[TrapLike]]


def net_traps(nic: Any, nics: Sequence[Any]) -> Sequence[TrapLike]:
    """:func:`ddpkit.net.select.traps`, imported when first needed."""
    from ddpkit.net.select import traps

    return traps(nic, nics)


def _where(setting: Setting) -> tuple[str, str | None, int | None]:
    return setting.origin, setting.path, setting.line


def source_warnings(
    env: Mapping[str, str],
    home: Path,
    sources: Sequence[ConfSource],
    *,
    user_conf_exists: Callable[[Path], bool] = Path.exists,
) -> tuple[NcclConfWarning, ...]:
    """Warnings about which files NCCL reads: hidden ~/.nccl.conf, a missing NCCL_CONF_FILE..."""
    found: list[NcclConfWarning] = []
    override = conf_file_from_env(env)
    user_conf = home / USER_CONF_NAME
    if override is not None:
        if user_conf_exists(user_conf) and Path(override) != user_conf:
            found.append(NcclConfWarning(
                "conf-file-hides-user-conf",
                _("NCCL_CONF_FILE={override} is set, so NCCL does not read {user_conf}",
                  override=override, user_conf=str(user_conf)),
                _("move the settings you need from {user_conf} into {override}, "
                  "or unset NCCL_CONF_FILE", user_conf=str(user_conf), override=override),
                str(user_conf),
            ))
        if "~" in override:
            found.append(NcclConfWarning(
                "conf-file-tilde",
                _("NCCL_CONF_FILE={override} contains '~', which NCCL does not expand",
                  override=override),
                _("give an absolute path, e.g. $HOME/..."),
            ))
        elif not Path(override).is_absolute():
            found.append(NcclConfWarning(
                "conf-file-relative",
                _("NCCL_CONF_FILE={override} is relative: NCCL resolves it against each "
                  "process's working directory", override=override),
                _("give an absolute path"),
            ))
    for source in sources:
        if source.role == "NCCL_CONF_FILE" and not source.exists:
            found.append(NcclConfWarning(
                "conf-file-missing",
                _("NCCL_CONF_FILE points at {path}, which does not exist", path=source.path),
                _("create it (`ddpkit nccl-conf set --file PATH ...`) or fix NCCL_CONF_FILE"),
                source.path,
            ))
        if source.exists and source.error is not None:
            found.append(NcclConfWarning(
                "conf-file-unreadable",
                _("{path} exists but cannot be read ({error}); NCCL skips it silently",
                  path=source.path, error=source.error),
                _("make it readable: {command}", command="chmod 0644 " + source.path),
                source.path,
            ))
    env_home = env.get("HOME")
    if env_home and Path(env_home) != home:
        shadow = Path(env_home) / USER_CONF_NAME
        if override is None and user_conf_exists(shadow):
            found.append(NcclConfWarning(
                "home-conf-not-read",
                _("$HOME is {env_home} but NCCL looks for ~/.nccl.conf in the account's home "
                  "{home}, so {shadow} is not read", env_home=env_home, home=str(home),
                  shadow=str(shadow)),
                _("move it to {user_conf}, or export NCCL_CONF_FILE={shadow}",
                  user_conf=str(user_conf), shadow=str(shadow)),
                str(shadow),
            ))
    return tuple(found)


def settings_warnings(
    settings: Sequence[Setting],
    interfaces: Sequence[N],
    *,
    traps: TrapFinder | None = net_traps,
) -> tuple[NcclConfWarning, ...]:
    """Warnings about the values in effect, checked against this machine's ``interfaces``.

    ``traps(nic, interfaces)`` reports why an interface is a bad choice for inter-node traffic
    (by default ``ddpkit.net.select.traps``); ``traps=None`` skips that check.
    """
    found: list[NcclConfWarning] = []
    by_name = {s.name: s for s in settings}
    for setting in settings:
        if setting.source == DEFAULT:
            continue
        found.extend(_name_warnings(setting))
        if setting.name == "NCCL_SOCKET_IFNAME":
            found.extend(ifname_warnings(setting, interfaces, traps=traps))
    found.extend(_socket_thread_warnings(by_name))
    return tuple(found)


def _name_warnings(setting: Setting) -> list[NcclConfWarning]:
    where, path, line = _where(setting)
    name = setting.name
    if not name.startswith("NCCL_"):
        return []  # non-NCCL names in files are reported with their line (conf-non-nccl-key)
    variable = known_variable(name)
    if variable is None:
        if setting.source != ENV:
            return []  # already reported as a file line problem, with its line number
        close = closest_names(name)
        hint = (_("did you mean {name}?", name=close[0]) if close
                else _("check the name in NCCL's docs"))
        return [NcclConfWarning("unknown-nccl-variable",
                                _("{name} ({where}) is not an NCCL variable ddpkit knows",
                                  name=name, where=where), hint,
                                path, line)]
    found: list[NcclConfWarning] = []
    if not value_is_accepted(variable, setting.value):
        found.append(NcclConfWarning(
            "value-not-accepted",
            _("{name}={value} ({where}) is not one of {choices}; NCCL ignores it", name=name,
              value=setting.value, where=where, choices=", ".join(variable.choices)),
            _("use one of: {choices}", choices=", ".join(variable.choices)), path, line))
    if variable.read_by_pytorch and setting.source != ENV:
        found.append(NcclConfWarning(
            "read-by-pytorch",
            _("{name} ({where}) is read by PyTorch at start-up, not by NCCL: a file entry "
              "comes too late", name=name, where=where),
            _("export {name} in the job's environment instead", name="TORCH_" + name),
            path, line))
    return found


def ifname_warnings(
    setting: Setting,
    interfaces: Sequence[N],
    *,
    traps: TrapFinder | None = net_traps,
) -> list[NcclConfWarning]:
    """What is wrong with one ``NCCL_SOCKET_IFNAME`` on this machine (empty when nothing is)."""
    where, path, line = _where(setting)
    value = setting.value
    names = sorted(nic.name for nic in interfaces)
    found: list[NcclConfWarning] = []

    def warn(warning_id: str, message: str, hint: str) -> None:
        found.append(NcclConfWarning(warning_id, message, hint, path, line))

    spec = parse_ifname(value)
    if spec is None:
        warn("ifname-ignored",
             _("NCCL_SOCKET_IFNAME={value!r} ({where}) is ignored by NCCL (one character or "
               "empty), so NCCL picks an interface on its own", value=value, where=where),
             _("give an interface name, e.g. NCCL_SOCKET_IFNAME==eth1"))
        return found
    inline_comment = re.search(r"[ \t]#", value) is not None  # reported as conf-inline-comment
    for token in () if inline_comment else padded_tokens(value):
        warn("ifname-whitespace",
             _("NCCL_SOCKET_IFNAME ({where}) has the token {token!r}: NCCL keeps the spaces, "
               "so it matches no interface", where=where, token=token),
             _("remove the spaces: {line}", line="NCCL_SOCKET_IFNAME="
               + value.replace(" ", "").replace("\t", "")))
    selected = matching_interfaces(value, names)
    if not selected:
        local = ", ".join(names) or _("none")
        warn("ifname-matches-nothing",
             _("NCCL_SOCKET_IFNAME={value} ({where}) matches no interface here "
               "(interfaces: {local}); NCCL will fail to find a socket interface", value=value,
               where=where, local=local),
             _("run `ddpkit nics` and use the right name, e.g. NCCL_SOCKET_IFNAME==eth1"))
        return found
    for token, others in overmatched(value, names):
        warn("ifname-prefix-overmatch",
             _("NCCL_SOCKET_IFNAME={value} ({where}): {token!r} is a prefix, so it also selects "
               "{others}", value=value, where=where, token=token, others=", ".join(others)),
             _("use the exact form {line}", line="NCCL_SOCKET_IFNAME=" + exact_spec(token)))
    if not spec.exclude and len(selected) > 1 and not overmatched(value, names):
        warn("ifname-several-interfaces",
             _("NCCL_SOCKET_IFNAME={value} ({where}) selects {selected}; the "
               "bootstrap uses whichever comes first in the kernel's list", value=value,
               where=where, selected=", ".join(selected)),
             _("name exactly one interface, e.g. {line}",
               line="NCCL_SOCKET_IFNAME==" + selected[0]))
    if traps is not None:
        by_name = {nic.name: nic for nic in interfaces}
        for name in selected:
            nic = by_name.get(name)
            if nic is None:
                continue
            reasons = [trap.message for trap in traps(nic, interfaces)]
            if reasons:
                message = _("NCCL_SOCKET_IFNAME={value} ({where}) selects {name}: {reason}",
                            value=value, where=where, name=name, reason=reasons[0])
                for reason in reasons[1:]:
                    message = _("{text}; {more}", text=message, more=reason)
                warn("ifname-selects-trap", message,
                     _("pick the interface that reaches your peers: "
                       "`ddpkit nccl-conf set --auto --to MASTER`"))
    return found


def _socket_thread_warnings(by_name: Mapping[str, Setting]) -> list[NcclConfWarning]:
    threads = by_name.get("NCCL_SOCKET_NTHREADS")
    socks = by_name.get("NCCL_NSOCKS_PERTHREAD")
    found: list[NcclConfWarning] = []
    n_threads = _as_int(threads)
    n_socks = _as_int(socks)
    if threads is not None and n_threads is not None and n_threads > MAX_SOCKET_THREADS:
        where, path, line = _where(threads)
        found.append(NcclConfWarning(
            "socket-threads-limit",
            _("NCCL_SOCKET_NTHREADS={threads} ({where}) is above NCCL's limit of {limit}",
              threads=n_threads, where=where, limit=MAX_SOCKET_THREADS),
            _("use at most {limit}", limit=MAX_SOCKET_THREADS), path, line))
    if (n_threads is not None and n_socks is not None
            and n_threads * n_socks > MAX_SOCKETS_TOTAL and socks is not None):
        where, path, line = _where(socks)
        found.append(NcclConfWarning(
            "socket-threads-limit",
            _("NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD = {total} is above "
              "NCCL's limit of {limit}", total=n_threads * n_socks, limit=MAX_SOCKETS_TOTAL),
            _("lower one of them (e.g. 4 x 4 for a 100G NIC)"), path, line))
    return found


def _as_int(setting: Setting | None) -> int | None:
    if setting is None:
        return None
    try:
        return int(setting.value)
    except ValueError:
        return None
