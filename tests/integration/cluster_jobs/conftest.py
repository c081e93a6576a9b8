"""A sim cluster whose nodes run OpenSSH servers, for the fan-out and join tests (root only).

``ssh_cluster(nodes)`` brings up a sim cluster (the shared ``sim_cluster`` fixture: reserved name,
torn down and checked for leftovers afterwards) and starts one sshd in every node with the product's
own ``ddpkit.sim.ssh.start`` (what ``ddpkit sim up N --ssh`` runs): listening on that node's private
address only, its own host key, key-only root login with a key generated for this cluster, every
file under the cluster's runtime directory. The client side is the ssh config file (``-F``) it
writes, naming that key and a known_hosts file holding the nodes' host keys, so host keys are
checked as usual (no ``StrictHostKeyChecking=no`` anywhere). Every sshd is stopped by pid at
teardown (``ddpkit.sim.ssh.stop``), and its absence checked.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from sshnodes import SshCluster

from ddpkit.sim import ssh as sim_ssh
from ddpkit.sim.topology import SimCluster

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


@pytest.fixture
def ssh_cluster(sim_cluster: Callable[..., SimCluster],
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[int], SshCluster]]:
    if not os.path.exists(SSHD):
        pytest.skip("sshd not installed (Debian: apt-get install -y openssh-server)")
    made: list[SshCluster] = []

    def bring_up(nodes: int) -> SshCluster:
        sim = sim_cluster(nodes=nodes)
        state = sim_ssh.start(sim)
        cluster = SshCluster(sim=sim, root=tmp_path_factory.mktemp("ssh"),
                             client_config=Path(state.files.client_config),
                             sshd={index: pid for index, (pid, _) in state.pids.items()})
        made.append(cluster)
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
        sim_ssh.stop(cluster.sim.name)
        for index, pid in cluster.sshd.items():
            with contextlib.suppress(psutil.NoSuchProcess):
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    problems.append(f"sshd pid {pid} on node {index} is still alive")
    assert not problems, "; ".join(problems)
