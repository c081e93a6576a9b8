"""The test's view of a sim cluster with an sshd in every node (see conftest.ssh_cluster)."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from ddpkit.sim.topology import SimCluster


@dataclass
class SshCluster:
    sim: SimCluster
    root: Path
    client_config: Path
    sshd: dict[int, int] = field(default_factory=dict)  # node index -> its sshd's pid

    @property
    def addresses(self) -> list[str]:
        return [node.private_address for node in self.sim.nodes]

    def ssh_flags(self) -> list[str]:
        return ["--ssh-config", str(self.client_config), "--ssh-connect-timeout", "5"]

    def hostfile(self, lines: list[str]) -> Path:
        path = self.root / "hostfile"
        path.write_text("# written by the test\n" + "\n".join(lines) + "\n")
        return path

    def stop_sshd(self, index: int) -> None:
        proc = psutil.Process(self.sshd.pop(index))
        proc.terminate()
        proc.wait(timeout=10)

    def assert_nodes_clean(self, within: float = 10) -> None:
        """No process is left inside any node (sessions that just ended get ``within`` s)."""
        deadline = time.monotonic() + within
        while True:
            left = {i: self.node_processes(i) for i in range(len(self.sim.nodes))}
            if not any(left.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert not any(left.values()), f"processes left on the nodes: {left}"

    def node_processes(self, index: int) -> dict[int, str]:
        """Every process inside node ``index`` (by network namespace), but its sshd listener."""
        inode = os.stat(f"/run/netns/{self.sim.nodes[index].namespace}").st_ino
        listener = self.sshd.get(index)
        found = {}
        for proc in psutil.process_iter(["pid", "cmdline"]):
            with contextlib.suppress(OSError, psutil.Error):
                if proc.pid != listener and os.stat(f"/proc/{proc.pid}/ns/net").st_ino == inode:
                    found[proc.pid] = " ".join(proc.info["cmdline"] or [])[:160]
        return found

    def sessions(self, index: int) -> list[psutil.Process]:
        """The sshd processes serving connections to node ``index`` right now."""
        try:
            return list(psutil.Process(self.sshd[index]).children())
        except psutil.NoSuchProcess:
            return []
