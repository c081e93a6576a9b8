"""A sim cluster whose nodes run OpenSSH servers, for the fan-out and join tests (root only).

``ssh_cluster(nodes)`` brings up a sim cluster (the shared ``sim_cluster`` fixture: reserved name,
torn down and checked for leftovers afterwards) and starts one ``sshd -D`` inside every node:
listening on that node's private address only, its own host key, key-only root login with a key
generated for this test, every file in a temporary directory. The client side is an ssh config
file (``-F``) naming that key and a known_hosts file pre-filled with the nodes' host keys, so host
keys are checked as usual (no ``StrictHostKeyChecking=no`` anywhere). Every sshd is stopped by pid
at teardown, and its absence checked.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from sshnodes import SshCluster

from ddpkit.sim.topology import SimCluster, node_argv

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
PRIVSEP_DIR = "/run/sshd"  # sshd refuses to start without it (the Debian service creates it)


def _keygen(path: Path, comment: str) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, timeout=30)
    return " ".join(path.with_name(path.name + ".pub").read_text().split()[:2])  # type and key


def _wait_listening(address: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"sshd exited: {log.read_text()}"
        with contextlib.suppress(OSError), socket.create_connection((address, 22), timeout=1):
            return
        time.sleep(0.1)
    raise AssertionError(f"sshd on {address} never listened: {log.read_text()}")


@pytest.fixture
def ssh_cluster(sim_cluster: Callable[..., SimCluster],
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[int], SshCluster]]:
    if not os.path.exists(SSHD):
        pytest.skip("sshd not installed (Debian: apt-get install -y openssh-server)")
    made: list[SshCluster] = []

    def bring_up(nodes: int) -> SshCluster:
        sim = sim_cluster(nodes=nodes)
        root = tmp_path_factory.mktemp("ssh")
        os.makedirs(PRIVSEP_DIR, mode=0o755, exist_ok=True)
        _keygen(root / "id_ed25519", "ddpkit-test-client")
        (root / "authorized_keys").write_text((root / "id_ed25519.pub").read_text())
        known = []
        cluster = SshCluster(sim=sim, root=root, client_config=root / "ssh_config")
        made.append(cluster)
        for node in sim.nodes:
            key = root / f"host_key_{node.index}"
            known.append(f"{node.private_address} {_keygen(key, node.hostname)}")
            config = root / f"sshd_config_{node.index}"
            config.write_text("\n".join([
                f"ListenAddress {node.private_address}", "Port 22", f"HostKey {key}",
                "PidFile none", f"AuthorizedKeysFile {root / 'authorized_keys'}",
                "PermitRootLogin prohibit-password", "PasswordAuthentication no",
                "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
                "X11Forwarding no", "AllowTcpForwarding no", "MaxStartups 64:30:128", ""]))
            log = root / f"sshd_{node.index}.log"
            with open(log, "wb") as handle:
                proc = subprocess.Popen(node_argv(sim, node.index, [SSHD, "-D", "-e", "-f", str(config)]),
                                        stdout=handle, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
            cluster.sshd[node.index] = proc
            _wait_listening(node.private_address, proc, log)
        (root / "known_hosts").write_text("\n".join(known) + "\n")
        cluster.client_config.write_text("\n".join([
            "Host *", "  User root", f"  IdentityFile {root / 'id_ed25519'}", "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {root / 'known_hosts'}", "  GlobalKnownHostsFile /dev/null",
            "  StrictHostKeyChecking yes", "  LogLevel ERROR", ""]))
        return cluster

    yield bring_up
    problems = []
    for cluster in made:
        for index in list(cluster.sshd):
            deadline = time.monotonic() + 10  # let finished sessions close by themselves first
            while cluster.sessions(index) and time.monotonic() < deadline:
                time.sleep(0.2)
            lingering = cluster.sessions(index)
            for session in lingering:
                with contextlib.suppress(psutil.Error):
                    session.kill()
            if lingering:
                problems.append(f"ssh sessions still open on node {index}: {lingering}")
            proc = cluster.sshd.pop(index)
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
                problems.append(f"sshd on node {index} ignored SIGTERM")
            if psutil.pid_exists(proc.pid) and \
                    psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
                problems.append(f"sshd pid {proc.pid} on node {index} is still alive")
    assert not problems, "; ".join(problems)
