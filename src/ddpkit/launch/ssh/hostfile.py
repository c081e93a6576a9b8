"""Host lists: ``--hosts h1,h2:2`` and hostfiles in the formats users already have (pure).

One host per line, ``#`` starts a comment, blank lines are skipped::

    # DeepSpeed / OpenMPI style          MPICH style        with an ssh user and port
    10.0.0.2 slots=8                     10.0.0.2:8         root@10.0.0.4:2222 slots=8
    10.0.0.3 slots=8 max_slots=8         10.0.0.3:8         [fd00::5] slots=8

``HOST:N`` means N slots (MPICH) unless the line also says ``slots=``: then ``:N`` is the ssh port
(``user@host:port slots=N``); ``port=N`` names the port in either form. Slots become the node's
``--nproc-per-node``; a host without slots uses ``--nproc-per-node``. Host and user names are
checked against a strict character set (letters, digits, ``.``, ``_``, ``-``; IPv6 in brackets) so
nothing a hostfile says can become an ssh option or shell syntax.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpkit.errors import ConfigError
from ddpkit.i18n import Text, _, _n
from ddpkit.net.ports import is_tcp_port

MAX_SLOTS = 1024
MAX_HOSTS = 4096  # far beyond any ssh fan-out ddpkit can drive from one machine
MAX_HOSTFILE_BYTES = 16 * 2**20
_HOSTNAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,251}[A-Za-z0-9_])?")
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9._-]{0,31}")
_TARGET = re.compile(
    r"(?:(?P<user>[^@\s]+)@)?(?:\[(?P<v6>[^\]\s]+)\]|(?P<host>[^:@\s\[\]]+))(?::(?P<num>[^:\s]*))?"
)
_IGNORED_KEYS = ("max_slots", "max-slots")  # OpenMPI's cap; meaningless for a launcher


@dataclass(frozen=True)
class Host:
    """One machine of the job, as the user named it."""

    name: str  # a host name or address, as ssh is to be given it (IPv6 without brackets)
    user: str | None = None
    port: int | None = None  # ssh port; None: ssh's default (or ~/.ssh/config)
    slots: int | None = None  # processes on this host; None: --nproc-per-node
    origin: str = ""  # where it was written: "hosts.txt:3" or "--hosts item 2"

    @property
    def label(self) -> str:
        """The short name used in output prefixes (``[label:rank]``) and file names."""
        return self.name

    @property
    def ssh_target(self) -> str:
        return f"{self.user}@{self.name}" if self.user else self.name

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class _Bad(ValueError):
    """Why one host entry is malformed (turned into a ConfigError naming its place)."""

    def __init__(self, why: Text) -> None:
        super().__init__(why)
        self.why = why


def parse_hostfile(text: str, path: str) -> tuple[Host, ...]:
    """Every host in a hostfile's ``text``; ConfigError ``bad-hostfile`` names ``path:line``."""
    hosts: list[Host] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if len(hosts) == MAX_HOSTS:
            raise _too_many(_("hostfile {path} lists more than {limit} hosts (line {line} is "
                              "host {next})", path=path, limit=MAX_HOSTS, line=number,
                              next=MAX_HOSTS + 1), path)
        try:
            hosts.append(_parse_line(line, f"{path}:{number}"))
        except _Bad as exc:
            raise ConfigError(
                "bad-hostfile",
                _("{path}:{line}: {why}: {text!r}", path=path, line=number, why=exc.why,
                  text=raw.strip()),
                _("write one host per line as `HOST slots=N`, `HOST:N` or "
                  "`[USER@]HOST[:PORT] slots=N` (`#` starts a comment)"),
                details={"path": path, "line": number},
            ) from None
    if not hosts:
        raise ConfigError("empty-hostfile", _("hostfile {path} lists no hosts", path=path),
                          _("put one host per line, e.g. `10.0.0.2 slots=8`"),
                          details={"path": path})
    return tuple(hosts)


def parse_hosts(spec: str) -> tuple[Host, ...]:
    """``--hosts h1,h2:2,user@h3``: comma-separated entries in the MPICH form (``HOST[:SLOTS]``)."""
    hosts = []
    items = [item.strip() for item in spec.split(",", MAX_HOSTS)]
    if len(items) > MAX_HOSTS:
        raise _too_many(_("--hosts lists more than {limit} hosts", limit=MAX_HOSTS), "--hosts")
    for index, item in enumerate(items, start=1):
        try:
            if not item:
                raise _Bad(_("empty entry"))
            if any(c.isspace() for c in item):
                raise _Bad(_("a host name cannot contain spaces"))
            hosts.append(_parse_line(item, f"--hosts item {index}"))
        except _Bad as exc:
            raise ConfigError(
                "bad-hosts",
                _("--hosts item {index} ({item!r}): {why}", index=index, item=item, why=exc.why),
                _("give comma-separated hosts as HOST or HOST:SLOTS, e.g. "
                  "--hosts 10.0.0.2:8,10.0.0.3:8"),
                details={"item": item, "index": index},
            ) from None
    return tuple(hosts)


def load_hostfile(path: Path) -> tuple[Host, ...]:
    """Read and parse a hostfile (the one I/O edge here): a regular file of sane size only."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise _not_found(path) from None
    except OSError as exc:
        raise ConfigError("hostfile-unreadable", _("cannot read hostfile {path}: {error}",
                                                   path=str(path), error=str(exc)),
                          _("check the file's permissions")) from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError("hostfile-unreadable", _("hostfile {path} is not a regular file",
                                                   path=str(path)),
                          _("give the path of a text file with one host per line")) from None
    if info.st_size > MAX_HOSTFILE_BYTES:
        raise _too_many(_("hostfile {path} is {size:.0f} MiB; a hostfile of {limit} hosts is "
                          "well under {most} MiB", path=str(path), size=info.st_size / 2**20,
                          limit=MAX_HOSTS, most=MAX_HOSTFILE_BYTES // 2**20), str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _not_found(path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("hostfile-unreadable", _("cannot read hostfile {path}: {error}",
                                                   path=str(path), error=str(exc)),
                          _("check the file's permissions and that it is text")) from None
    return parse_hostfile(text, str(path))


def _not_found(path: Path) -> ConfigError:
    return ConfigError("hostfile-not-found", _("hostfile {path} does not exist", path=str(path)),
                       _("check the path given to --hostfile"))


def _too_many(message: Text, where: str) -> ConfigError:
    return ConfigError("too-many-hosts", message,
                       _("ddpkit drives at most {limit} hosts over ssh from one machine; for a "
                         "cluster that size use a scheduler (Slurm: `srun ddpkit launch ...` per "
                         "node)", limit=MAX_HOSTS),
                       details={"where": where, "max_hosts": MAX_HOSTS})


def duplicate_warnings(hosts: Sequence[Host]) -> tuple[Text, ...]:
    """One line per host listed more than once (the same ssh target and port): each copy would
    start its own node of the job on that machine."""
    seen: dict[tuple[str | None, str, int | None], str] = {}
    warnings = []
    for host in hosts:
        key = (host.user, host.name, host.port)
        if key in seen:
            warnings.append(_("{origin}: {target} is listed again (first at {first}); it will run "
                              "two nodes of the job. Give it slots=N instead if that is not what "
                              "you meant", origin=host.origin, target=host.ssh_target,
                              first=seen[key]))
        else:
            seen[key] = host.origin
    return tuple(warnings)


def check_host_name(name: str) -> str:
    """``name`` if it is a plain host name or IP address; ValueError saying why not."""
    if name.startswith("-"):
        raise _Bad(_("host {name!r} starts with '-' (it would be read as an ssh option)",
                       name=name))
    try:
        return ipaddress.ip_address(name).compressed
    except ValueError:
        pass
    if not _HOSTNAME.fullmatch(name):
        raise _Bad(_("{name!r} is not a host name (letters, digits, '.', '_', '-') or an IP "
                       "address", name=name))
    return name


def _parse_line(line: str, origin: str) -> Host:
    target, *words = line.split()
    match = _TARGET.fullmatch(target)
    if not match:
        raise _Bad(_("{target!r} is not [USER@]HOST[:N]", target=target))
    keys: dict[str, int] = {}
    for word in words:
        key, sep, text = word.partition("=")
        if not sep:
            raise _Bad(_("{word!r} is not KEY=VALUE", word=word))
        if key in _IGNORED_KEYS:
            continue
        if key not in ("slots", "port"):
            raise _Bad(_("unknown setting {key!r} (known: slots, port, max_slots)", key=key))
        if key in keys:
            raise _Bad(_("{key} is given twice", key=key))
        keys[key] = _number(text, key)
    user = match.group("user")
    if user is not None and not _USER.fullmatch(user):
        raise _Bad(_("{user!r} is not a user name", user=user))
    if match.group("v6") is not None:
        try:
            name = ipaddress.IPv6Address(match.group("v6")).compressed
        except ValueError:
            raise _Bad(_("[{address}] is not an IPv6 address", address=match.group("v6"))) from None
    else:
        name = check_host_name(match.group("host"))
    slots, port = keys.get("slots"), keys.get("port")
    after_colon = match.group("num")
    if after_colon is not None:
        value = _number(after_colon, _("the number after ':'"))
        if "slots" in keys:
            if port is not None:
                raise _Bad(_("the port is given twice (':N' and port=)"))
            port = value
        elif value > MAX_SLOTS:
            raise _Bad(_("{value} slots is more than {limit}; for an ssh port write "
                         "`HOST:{value} slots=N` or `HOST port={value}`", value=value,
                         limit=MAX_SLOTS))
        else:
            slots = value
    if slots is not None and not 1 <= slots <= MAX_SLOTS:
        raise _Bad(_("slots={slots} is outside 1..{limit}", slots=slots, limit=MAX_SLOTS))
    if port is not None and not is_tcp_port(port):
        raise _Bad(_("port {port} is not a TCP port", port=port))
    return Host(name=name, user=user, port=port, slots=slots, origin=origin)


def _number(text: str, what: str) -> int:
    if not text.isdigit():
        raise _Bad(_("{what} must be a whole number, not {text!r}", what=what, text=text))
    return int(text)


def describe(hosts: Sequence[Host]) -> str:
    """``10.0.0.2 (8 slots), 10.0.0.3`` for messages."""
    return ", ".join(_n("{target} ({count} slot)", "{target} ({count} slots)", h.slots,
                         target=h.ssh_target) if h.slots else h.ssh_target for h in hosts)
