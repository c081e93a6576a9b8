"""Remove a sim cluster: stop its processes, delete its links and namespaces, its files.

Everything is found from the cluster's name (see ``ddpkit.sim.topology``), so this also clears a
cluster whose ``up`` was killed half-way, or whose state file is gone.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Any

from ddpkit.errors import EnvironmentProblem
from ddpkit.sim import host, ssh
from ddpkit.sim.topology import (
    ETC_NETNS_DIR,
    NETNS_DIR,
    owned_link_pattern,
    owned_namespace_pattern,
    runtime_dir,
)


@dataclass(frozen=True)
class DownReport:
    """What ``down`` removed (empty tuples: there was nothing of that cluster)."""

    name: str
    processes_killed: tuple[int, ...]
    namespaces: tuple[str, ...]
    links: tuple[str, ...]
    paths: tuple[str, ...]

    @property
    def found(self) -> bool:
        return bool(self.processes_killed or self.namespaces or self.links or self.paths)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "found": self.found,
            "processes_killed": list(self.processes_killed),
            "namespaces": list(self.namespaces),
            "links": list(self.links),
            "paths": list(self.paths),
        }


def teardown(name: str, tools: host.Tools, run: host.CommandRunner) -> DownReport:
    namespaces = host.namespaces_matching(owned_namespace_pattern(name))
    uts_files = _uts_files(name)
    inodes = {
        inode
        for path in [f"{NETNS_DIR}/{ns}" for ns in namespaces] + uts_files
        if (inode := host.namespace_inode(path)) is not None
    }
    killed: set[int] = set(ssh.stop(name))  # its sshds by their recorded pids, then the rest
    for _ in range(5):  # again, in case a process forked while the others were being stopped
        pids = host.processes_in_namespaces(inodes, inodes)
        if not pids:
            break
        killed.update(host.terminate(pids, inodes))
    problems: list[str] = []
    links = host.host_links_matching(owned_link_pattern(name))
    for link in sorted(links, key=lambda link: link.endswith("-br")):  # bridge ports first
        _run_or_note(run, tools, ["ip", "link", "del", link], problems)
    for ns in namespaces:
        _run_or_note(run, tools, ["ip", "netns", "del", ns], problems)
    paths = [f"{ETC_NETNS_DIR}/{ns}" for ns in _hosts_dirs(name)]
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
    for path in uts_files:
        for _ in range(5):
            if host.namespace_inode(path) is None:
                break
            _run_or_note(run, tools, ["umount", path], problems)
    if os.path.isdir(runtime_dir(name)):
        paths += [*uts_files, runtime_dir(name)]
        if not any(host.namespace_inode(path) is not None for path in uts_files):
            shutil.rmtree(runtime_dir(name), ignore_errors=True)
    remaining = present_pieces(name) + [
        f"process {pid}" for pid in host.processes_in_namespaces(inodes, inodes)
    ]
    if remaining:
        raise EnvironmentProblem(
            "sim-down-incomplete",
            _("sim down {name} could not remove {remaining} ({problems})", name=name,
              remaining=", ".join(remaining), problems="; ".join(problems)) if problems else
            _("sim down {name} could not remove {remaining}", name=name,
              remaining=", ".join(remaining)),
            _("inspect them (`ip netns list`, `ip link`), then run `ddpkit sim down --name "
              "{name}` again", name=name),
            details={"remaining": remaining},
        )
    return DownReport(
        name=name,
        processes_killed=tuple(sorted(killed)),
        namespaces=tuple(namespaces),
        links=tuple(sorted(links)),
        paths=tuple(sorted(set(paths))),
    )


def _run_or_note(run: host.CommandRunner, tools: host.Tools, argv: list[str], problems: list[str]) -> None:
    proc = run(tools, argv)
    if proc.returncode != 0:
        problems.append(f"`{' '.join(argv)}`: {proc.stderr.strip() or proc.returncode}")


def _uts_files(name: str) -> list[str]:
    directory = runtime_dir(name)
    try:
        entries = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(f"{directory}/{entry}" for entry in entries if entry.startswith("uts-n"))


def _hosts_dirs(name: str) -> list[str]:
    pattern = owned_namespace_pattern(name)
    try:
        entries = os.listdir(ETC_NETNS_DIR)
    except FileNotFoundError:
        return []
    return sorted(entry for entry in entries if pattern.fullmatch(entry))


def present_pieces(name: str) -> list[str]:
    pieces = [f"namespace {ns}" for ns in host.namespaces_matching(owned_namespace_pattern(name))]
    pieces += [f"link {link}" for link in host.host_links_matching(owned_link_pattern(name))]
    pieces += [f"{ETC_NETNS_DIR}/{ns}" for ns in _hosts_dirs(name)]
    if os.path.exists(runtime_dir(name)):
        pieces.append(runtime_dir(name))
    return pieces
