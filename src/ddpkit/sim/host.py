"""I/O on the host for ``ddpkit.sim``: root and tools, running commands, what exists, processes.

Tools are looked up on a fixed system path (as sudo's ``secure_path`` does), never on the caller's
``PATH``, so a root command never runs whatever ``ip`` a user's environment puts first.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ddpkit.errors import ConfigError, EnvironmentProblem
from ddpkit.i18n import _
from ddpkit.sim.topology import NETNS_DIR

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TOOL_PACKAGES: Mapping[str, str] = {
    "hostname": "hostname",
    "ip": "iproute2",
    "nsenter": "util-linux",
    "ssh-keygen": "openssh-client",
    "sshd": "openssh-server",
    "tc": "iproute2",
    "umount": "mount",
    "unshare": "util-linux",
}
COMMAND_TIMEOUT_S = 30.0
COMMAND_ENV = {"PATH": SYSTEM_PATH, "LC_ALL": "C"}


def require_root(euid: int | None = None, *, action: str = "ddpkit sim") -> None:
    euid = os.geteuid() if euid is None else euid
    if euid != 0:
        raise EnvironmentProblem(
            "needs-root",
            _("{action} creates network namespaces and links, which needs root (euid is {euid})",
              action=action, euid=euid),
            _("run it as root, e.g. `sudo ddpkit sim up 2` (`--dry-run` shows the plan without "
              "root)"),
        )


@dataclass(frozen=True)
class Tools:
    """Absolute paths of the tools a sim action runs."""

    paths: Mapping[str, str]

    def resolve(self, argv: Sequence[str]) -> list[str]:
        return [self.paths[argv[0]], *argv[1:]]


def find_tools(names: Iterable[str], search_path: str = SYSTEM_PATH) -> Tools:
    """Every tool in ``names`` on ``search_path``; ``missing-tool`` naming the Debian package if not."""
    paths: dict[str, str] = {}
    for name in sorted(set(names)):
        found = shutil.which(name, path=search_path)
        if found is None:
            package = TOOL_PACKAGES.get(name, name)
            raise EnvironmentProblem(
                "missing-tool",
                _("`{name}` is not installed (looked in {path})", name=name, path=search_path),
                _("install it: `apt-get install {package}` (Debian/Ubuntu package {package})",
                  package=package),
                details={"tool": name, "package": package},
            )
        paths[name] = found
    return Tools(paths)


CommandRunner = Callable[[Tools, Sequence[str]], "subprocess.CompletedProcess[str]"]


def run_command(tools: Tools, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run one tool with a clean environment and a timeout; the caller checks the return code."""
    return subprocess.run(
        tools.resolve(argv),
        capture_output=True,
        text=True,
        env=dict(COMMAND_ENV),
        timeout=COMMAND_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        check=False,
    )


# -- what exists ---------------------------------------------------------------------------------


def namespaces_matching(pattern: re.Pattern[str]) -> list[str]:
    try:
        names = os.listdir(NETNS_DIR)
    except FileNotFoundError:
        return []
    return sorted(name for name in names if pattern.fullmatch(name))


def host_links_matching(pattern: re.Pattern[str]) -> list[str]:
    """Links in this process's network namespace whose names match ``pattern``."""
    return sorted(name for name in os.listdir("/sys/class/net") if pattern.fullmatch(name))


def namespace_inode(path: str) -> int | None:
    """The inode of the namespace bound at ``path`` (/run/netns/X or a UTS file); None if unbound.

    A bound file is an nsfs mount, on another device than its directory; an unbound placeholder is
    a plain empty file on the directory's own filesystem.
    """
    try:
        stat = os.stat(path)
        parent = os.stat(os.path.dirname(path) or ".")
    except OSError:
        return None
    return stat.st_ino if stat.st_dev != parent.st_dev else None


def processes_in_namespaces(net_inodes: Iterable[int], uts_inodes: Iterable[int] = ()) -> dict[int, int]:
    """{pid: inode} of every process (but this one) inside one of the given namespaces."""
    wanted = {"net": set(net_inodes), "uts": set(uts_inodes)}
    found: dict[int, int] = {}
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        for kind, inodes in wanted.items():
            if not inodes:
                continue
            try:
                inode = os.stat(f"/proc/{entry}/ns/{kind}").st_ino
            except OSError:  # exited, a zombie (no namespaces left), or a kernel thread we cannot see
                continue
            if inode in inodes:
                found[int(entry)] = inode
                break
    return dict(sorted(found.items()))


def terminate(pids: Iterable[int], still_inside: Iterable[int], *, grace_s: float = 3.0) -> list[int]:
    """SIGTERM each pid, SIGKILL the ones alive after ``grace_s``; returns the pids signalled.

    Each pid is pinned with a pidfd and re-checked (still in one of the ``still_inside`` network or
    UTS namespace inodes) before any signal, so a recycled pid is never hit.
    """
    inodes = set(still_inside)
    handles: dict[int, int] = {}
    for pid in sorted(set(pids)):
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        if _inside(pid, inodes):
            handles[pid] = fd
        else:
            os.close(fd)
    try:
        for fd in handles.values():
            _signal(fd, signal.SIGTERM)
        alive = _wait_exit(handles, grace_s)
        for pid in alive:
            _signal(handles[pid], signal.SIGKILL)
        _wait_exit({pid: handles[pid] for pid in alive}, 5.0)
    finally:
        for fd in handles.values():
            os.close(fd)
    return sorted(handles)


def _inside(pid: int, inodes: set[int]) -> bool:
    for kind in ("net", "uts"):
        try:
            if os.stat(f"/proc/{pid}/ns/{kind}").st_ino in inodes:
                return True
        except OSError:
            return False
    return False


def _signal(fd: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        signal.pidfd_send_signal(fd, signum)


def _wait_exit(handles: Mapping[int, int], timeout_s: float) -> list[int]:
    """Wait until every pidfd reports its process exited; the pids still running at the deadline."""
    pending = dict(handles)
    deadline = time.monotonic() + timeout_s
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        poller = select.poll()
        for fd in pending.values():
            poller.register(fd, select.POLLIN)
        ready = {fd for fd, _ in poller.poll(left * 1000)}
        pending = {pid: fd for pid, fd in pending.items() if fd not in ready}
    return sorted(pending)


# -- the host's own networks ---------------------------------------------------------------------


@dataclass(frozen=True)
class HostNetwork:
    network: ipaddress.IPv4Network
    device: str
    source: Literal["address", "route"]  # how the network was found


def host_networks(tools: Tools) -> list[HostNetwork]:
    """IPv4 networks the host already has, from its addresses and main routing table."""
    found: list[HostNetwork] = []
    addrs = _ip_json(tools, ["ip", "-j", "-4", "addr", "show"])
    for link in addrs:
        for info in link.get("addr_info", []):
            if info.get("family") == "inet" and "local" in info:
                cidr = f"{info['local']}/{info.get('prefixlen', 32)}"
                net = ipaddress.IPv4Network(cidr, strict=False)
                found.append(HostNetwork(net, str(link.get("ifname", "?")), "address"))
    for route in _ip_json(tools, ["ip", "-j", "-4", "route", "show", "table", "main"]):
        dst = str(route.get("dst", ""))
        if dst and dst != "default":
            try:
                net = ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False)
            except ValueError:
                continue
            found.append(HostNetwork(net, str(route.get("dev", "?")), "route"))
    return found


def _ip_json(tools: Tools, argv: Sequence[str]) -> list[dict[str, Any]]:
    proc = run_command(tools, argv)
    if proc.returncode != 0:
        raise EnvironmentProblem(
            "sim-host-query-failed",
            _("`{command}` failed: {reason}", command=" ".join(argv),
              reason=proc.stderr.strip() or proc.returncode),
            _("check that iproute2 works here (`ip addr`)"),
        )
    try:
        data = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError as exc:
        raise EnvironmentProblem(
            "sim-host-query-failed",
            _("`{command}` printed no JSON ({reason})", command=" ".join(argv), reason=str(exc)),
            _("install an iproute2 with JSON output (`ip -j`), Debian 10 or later"),
        ) from None
    return [item for item in data if isinstance(item, dict)]


def check_subnet_free(tools: Tools, network: ipaddress.IPv4Network, cluster: str) -> None:
    for existing in host_networks(tools):
        if existing.network.overlaps(network):
            owner = existing.device.removesuffix("-br") if existing.device.endswith("-br") else ""
            raise ConfigError(
                "sim-subnet-in-use",
                _("subnet {network} overlaps {existing} ({source} on {device} (sim cluster "
                  "{owner}'s bridge)) already on this host", network=str(network),
                  existing=str(existing.network), source=existing.source,
                  device=existing.device, owner=owner) if owner else
                _("subnet {network} overlaps {existing} ({source} on {device}) already on this "
                  "host", network=str(network), existing=str(existing.network),
                  source=existing.source, device=existing.device),
                _("pick another private subnet for cluster {cluster}, e.g. --subnet "
                  "10.99.0.0/24", cluster=cluster),
                details={"device": existing.device, "network": str(existing.network)},
            )
