"""An OpenSSH server in every node of a sim cluster (``ddpkit sim up N --ssh``), and its client side.

Every file lives in the cluster's runtime directory, ``/run/ddpkit-sim/<name>/ssh/``, so ``down``
removes them with the rest: a host key per node and a client key generated for this cluster, an
``sshd_config`` per node (listening on the node's private address only, key-only root login), the
client's ``known_hosts`` (every node's host key: host-key checking stays on), an ``ssh_config`` that
names both, and a DeepSpeed-style ``hostfile``. Nothing is written under ``~/.ssh``.

Each sshd runs ``-D`` (in the foreground, so its pid is the one started) inside its node; the pids
and their start times are recorded in ``sshd.json``, and :func:`stop` signals exactly those pids
(re-checked through a pidfd: a recycled pid is never hit).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from typing import Any

import psutil

from ddpkit.atomic_file import replace_file
from ddpkit.errors import EnvironmentProblem
from ddpkit.i18n import _
from ddpkit.sim import host
from ddpkit.sim.steps import Step
from ddpkit.sim.topology import (
    NETNS_DIR,
    SimCluster,
    node_argv,
    owned_namespace_pattern,
    runtime_dir,
)

PRIVSEP_DIR = "/run/sshd"  # sshd refuses to start without it (Debian's service creates it)
LISTEN_TIMEOUT_S = 20.0
STOP_GRACE_S = 5.0
CLIENT_USER = "root"
SSH_TOOLS = {"sshd", "ssh-keygen"}


@dataclass(frozen=True)
class SshLayout:
    """Pure: where a cluster's ssh files live (all under its runtime directory)."""

    directory: str

    @property
    def client_key(self) -> str:
        return f"{self.directory}/id_ed25519"

    @property
    def authorized_keys(self) -> str:
        return f"{self.directory}/authorized_keys"

    @property
    def known_hosts(self) -> str:
        return f"{self.directory}/known_hosts"

    @property
    def client_config(self) -> str:
        return f"{self.directory}/ssh_config"

    @property
    def hostfile(self) -> str:
        return f"{self.directory}/hostfile"

    @property
    def pids_file(self) -> str:
        return f"{self.directory}/sshd.json"

    def host_key(self, index: int) -> str:
        return f"{self.directory}/host_key_{index}"

    def sshd_config(self, index: int) -> str:
        return f"{self.directory}/sshd_config_{index}"

    def log(self, index: int) -> str:
        return f"{self.directory}/sshd_{index}.log"

    def to_dict(self) -> dict[str, str]:
        return {"directory": self.directory, "hostfile": self.hostfile,
                "ssh_config": self.client_config, "known_hosts": self.known_hosts,
                "identity": self.client_key}


def layout(name: str) -> SshLayout:
    return SshLayout(f"{runtime_dir(name)}/ssh")


def sshd_config_text(cluster: SimCluster, index: int, files: SshLayout) -> str:
    """Pure: node ``index``'s server: its private address only, its own host key, key-only root."""
    node = cluster.nodes[index]
    return "\n".join([
        f"ListenAddress {node.private_address}", "Port 22", f"HostKey {files.host_key(index)}",
        "PidFile none", f"AuthorizedKeysFile {files.authorized_keys}",
        "PermitRootLogin prohibit-password", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no", "X11Forwarding no",
        "AllowTcpForwarding no", "MaxStartups 128:30:256", "MaxSessions 64", ""])


def client_config_text(files: SshLayout) -> str:
    """Pure: the client side (``ssh -F``): this cluster's key and known_hosts, checking kept on."""
    return "\n".join([
        "Host *", f"  User {CLIENT_USER}", f"  IdentityFile {files.client_key}",
        "  IdentitiesOnly yes", f"  UserKnownHostsFile {files.known_hosts}",
        "  GlobalKnownHostsFile /dev/null", "  StrictHostKeyChecking yes", "  LogLevel ERROR", ""])


def hostfile_text(cluster: SimCluster) -> str:
    """Pure: a DeepSpeed-style hostfile, node 0 (the master) first, one slot per node."""
    lines = [f"# sim cluster {cluster.name}: {len(cluster.nodes)} nodes, node 0 is the master"]
    lines += [f"{node.private_address} slots=1" for node in cluster.nodes]
    return "\n".join(lines) + "\n"


def plan(cluster: SimCluster) -> tuple[Step, ...]:
    """Pure: what ``up --ssh`` does after the network is up, as steps for ``--dry-run`` (the keys
    are generated, so their public halves and known_hosts are named, not shown)."""
    files = layout(cluster.name)
    steps = [Step(_("generate the cluster's client key"),
                  ("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                   f"ddpkit-sim-{cluster.name}", "-f", files.client_key)),
             Step(_("authorize it for root in every node"),
                  ("cp", files.client_key + ".pub", files.authorized_keys))]
    for node in cluster.nodes:
        steps += [Step(_("generate {host}'s host key (its public half goes into {path})",
                         host=node.hostname, path=files.known_hosts),
                       ("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", node.hostname,
                        "-f", files.host_key(node.index))),
                  Step(_("write {host}'s sshd configuration", host=node.hostname),
                       path=files.sshd_config(node.index),
                       content=sshd_config_text(cluster, node.index, files))]
    steps.append(Step(_("write the ssh client configuration (StrictHostKeyChecking yes)"),
                      path=files.client_config, content=client_config_text(files)))
    for node in cluster.nodes:
        steps.append(Step(_("start sshd in {host} on {address}:22 (its pid in {path})",
                            host=node.hostname, address=node.private_address,
                            path=files.pids_file),
                          tuple(node_argv(cluster, node.index, [
                              "sshd", "-D", "-e", "-f", files.sshd_config(node.index)]))))
    steps.append(Step(_("write the hostfile for --hosts"), path=files.hostfile,
                      content=hostfile_text(cluster)))
    return tuple(steps)


@dataclass(frozen=True)
class SshState:
    """A cluster's running sshds: node index -> (pid, start time), and the file layout."""

    files: SshLayout
    pids: dict[int, tuple[int, float]]

    def to_dict(self) -> dict[str, Any]:
        return {**self.files.to_dict(),
                "sshd": {str(i): pid for i, (pid, _started) in sorted(self.pids.items())}}


def read_state(name: str) -> SshState | None:
    files = layout(name)
    try:
        with open(files.pids_file, encoding="utf-8") as handle:
            doc = json.load(handle)
        pids = {int(i): (int(entry["pid"]), float(entry["started"]))
                for i, entry in doc["sshd"].items()}
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError, AttributeError):
        return SshState(files, {})
    return SshState(files, pids)


def start(cluster: SimCluster) -> SshState:
    """Generate keys, write every file, start one sshd per node and wait until each listens.

    Already running (a previous ``up --ssh``): returns the recorded state. Any failure stops the
    sshds started so far and removes the ssh directory before the error propagates.
    """
    found = read_state(cluster.name)
    if found is not None and found.pids and all(_alive(p) for p in found.pids.values()):
        return found
    stop(cluster.name)
    tools = _tools()
    files = layout(cluster.name)
    pids: dict[int, tuple[int, float]] = {}
    try:
        os.makedirs(files.directory, mode=0o700, exist_ok=True)
        os.makedirs(PRIVSEP_DIR, mode=0o755, exist_ok=True)
        _keygen(tools, files.client_key, f"ddpkit-sim-{cluster.name}")
        with open(files.client_key + ".pub", encoding="ascii") as handle:
            replace_file(files.authorized_keys, handle.read())
        known = []
        for node in cluster.nodes:
            public = _keygen(tools, files.host_key(node.index), node.hostname)
            known.append(f"{node.private_address} {public}")
            replace_file(files.sshd_config(node.index), sshd_config_text(cluster, node.index, files))
        replace_file(files.known_hosts, "\n".join(known) + "\n")
        replace_file(files.client_config, client_config_text(files))
        for node in cluster.nodes:
            pids[node.index] = _start_one(cluster, node.index, tools, files)
            _write_pids(files, pids)
        for node in cluster.nodes:
            _wait_listening(node.private_address, pids[node.index], files.log(node.index))
        replace_file(files.hostfile, hostfile_text(cluster))
    except BaseException:
        with contextlib.suppress(Exception):
            stop(cluster.name)
        raise
    return SshState(files, pids)


def stop(name: str) -> list[int]:
    """Stop every recorded sshd of cluster ``name`` by pid (SIGTERM, SIGKILL after a grace; each
    pid re-checked to be that sshd, inside one of the cluster's nodes); the pids signalled. Their
    files go with the runtime directory (``down``)."""
    state = read_state(name)
    if state is None:
        return []
    inodes = {inode for ns in host.namespaces_matching(owned_namespace_pattern(name))
              if (inode := host.namespace_inode(f"{NETNS_DIR}/{ns}")) is not None}
    live = [pid for pid, started in state.pids.values() if _alive((pid, started))]
    stopped = host.terminate(live, inodes, grace_s=STOP_GRACE_S) if live else []
    with contextlib.suppress(FileNotFoundError):
        os.unlink(state.files.pids_file)
    return stopped


def _alive(entry: tuple[int, float]) -> bool:
    """The recorded process is still that process (same pid and start time, not a zombie)."""
    pid, started = entry
    try:
        proc = psutil.Process(pid)
        same = abs(proc.create_time() - started) < 0.05
        return same and bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _tools() -> host.Tools:
    return host.find_tools({"ip", "nsenter", *SSH_TOOLS})


def _keygen(tools: host.Tools, path: str, comment: str) -> str:
    """A new ed25519 key at ``path`` (replacing any); its public half as ``TYPE KEY``."""
    for old in (path, path + ".pub"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(old)
    proc = host.run_command(tools, ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment,
                                    "-f", path])
    if proc.returncode != 0:
        raise EnvironmentProblem(
            "sim-step-failed", _("ssh-keygen failed for {path}: {reason}", path=path,
                                 reason=proc.stderr.strip() or proc.returncode),
            _("check that {directory} is writable and ssh-keygen works", directory=path))
    with open(path + ".pub", encoding="ascii") as handle:
        return " ".join(handle.read().split()[:2])


def _start_one(cluster: SimCluster, index: int, tools: host.Tools,
               files: SshLayout) -> tuple[int, float]:
    argv = tools.resolve(node_argv(cluster, index, [tools.paths["sshd"], "-D", "-e", "-f",
                                                    files.sshd_config(index)]))
    with open(files.log(index), "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env=dict(host.COMMAND_ENV))
    return proc.pid, psutil.Process(proc.pid).create_time()


def _write_pids(files: SshLayout, pids: dict[int, tuple[int, float]]) -> None:
    doc = {"sshd": {str(i): {"pid": pid, "started": started}
                    for i, (pid, started) in sorted(pids.items())}}
    replace_file(files.pids_file, json.dumps(doc, indent=2) + "\n")


def _wait_listening(address: str, entry: tuple[int, float], log: str) -> None:
    deadline = time.monotonic() + LISTEN_TIMEOUT_S
    while time.monotonic() < deadline:
        if not _alive(entry):
            break
        with contextlib.suppress(OSError), socket.create_connection((address, 22), timeout=1):
            return
        time.sleep(0.05)
    with contextlib.suppress(OSError), open(log, encoding="utf-8", errors="replace") as handle:
        said = handle.read()[-400:].strip()
    raise EnvironmentProblem(
        "sim-step-failed",
        _("the sshd of the node at {address} did not listen on port 22 within {seconds:g}s "
          "({said})", address=address, seconds=LISTEN_TIMEOUT_S, said=said or "no output"),
        _("everything built was removed again; check that `sshd -t` works on this machine"))
