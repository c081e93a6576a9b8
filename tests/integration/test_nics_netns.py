"""`ddpkit nics` inside network namespaces built like the seed page's rented instance.

Namespace A (the node) has eth0 = 172.17.0.4/16, a veth whose peer sits alone in namespace C
(nothing reachable; A's default route points that way, as on the real instances), and
eth1 = 10.0.0.2/24, a veth pair to namespace B holding the peer 10.0.0.3/24. Every name starts
with ``dkn<pid>`` and everything is removed in ``finally``, checked afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

pytestmark = pytest.mark.root

PREFIX = f"dkn{os.getpid()}"


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=check)


def our_namespaces() -> list[str]:
    listed = sh("ip", "netns", "list").stdout.split()
    return sorted(name for name in listed if name.startswith(PREFIX))


def our_host_links() -> list[str]:
    links = json.loads(sh("ip", "-j", "link").stdout or "[]")
    return sorted(link["ifname"] for link in links if link["ifname"].startswith(PREFIX))


@dataclass(frozen=True)
class Node:
    ns: str

    def ddpkit(self, *argv: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GLOO_"))}
        return subprocess.run(
            ["ip", "netns", "exec", self.ns, sys.executable, "-m", "ddpkit", *argv],
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip


@pytest.fixture
def node() -> Iterator[Node]:
    a, b, c = f"{PREFIX}a", f"{PREFIX}b", f"{PREFIX}c"
    assert not our_namespaces(), "leftovers from an earlier run with the same pid"
    try:
        for ns in (a, b, c):
            sh("ip", "netns", "add", ns)
        steps = [
            ["-n", a, "link", "set", "lo", "up"],
            # links are created inside A and their peers moved straight into B / C: nothing on the host
            ["-n", a, "link", "add", "eth0", "type", "veth", "peer", "name", f"{PREFIX}p0", "netns", c],
            ["-n", a, "link", "add", "eth1", "type", "veth", "peer", "name", f"{PREFIX}p1", "netns", b],
            ["-n", a, "addr", "add", "172.17.0.4/16", "dev", "eth0"],
            ["-n", a, "addr", "add", "10.0.0.2/24", "dev", "eth1"],
            ["-n", b, "addr", "add", "10.0.0.3/24", "dev", f"{PREFIX}p1"],
            ["-n", a, "link", "set", "eth0", "up"],
            ["-n", a, "link", "set", "eth1", "up"],
            ["-n", b, "link", "set", f"{PREFIX}p1", "up"],
            ["-n", c, "link", "set", f"{PREFIX}p0", "up"],
            ["-n", a, "route", "add", "default", "via", "172.17.0.1", "dev", "eth0"],
        ]
        for step in steps:
            sh("ip", *step)
        yield Node(a)
        for ns in (a, b, c):  # no process may be left inside our namespaces
            assert sh("ip", "netns", "pids", ns).stdout.split() == []
    finally:
        for ns in (a, b, c):
            sh("ip", "netns", "del", ns, check=False)
    assert our_namespaces() == []
    assert our_host_links() == []


def test_to_peer_on_private_network_picks_eth1(node: Node) -> None:
    proc = node.ddpkit("nics", "--to", "10.0.0.3", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    kinds = {i["name"]: (i["kind"], [a["address"] for a in i["addresses"] if a["family"] == "ipv4"])
             for i in doc["interfaces"]}  # fmt: skip
    assert kinds == {"eth0": ("veth", ["172.17.0.4"]), "eth1": ("veth", ["10.0.0.2"]),
                     "lo": ("loopback", ["127.0.0.1"])}  # fmt: skip
    traps = {i["name"]: [t["id"] for t in i["traps"]] for i in doc["interfaces"]}
    assert traps["eth0"] == ["docker-default-subnet"] and traps["eth1"] == []
    assert doc["route"]["ifname"] == "eth1" and doc["route"]["source"] == "10.0.0.2"
    assert doc["route"]["method"] == "ip-route-get"
    assert doc["recommendation"]["interface"] == "eth1"
    assert doc["recommendation"]["address"] == "10.0.0.2"
    assert doc["env_lines"] == ["NCCL_SOCKET_IFNAME==eth1", "GLOO_SOCKET_IFNAME=eth1"]

    human = node.ddpkit("nics", "--to", "10.0.0.3")
    assert human.returncode == 0, human.stderr
    assert "NCCL_SOCKET_IFNAME==eth1" in human.stdout.splitlines()
    assert "GLOO_SOCKET_IFNAME=eth1" in human.stdout.splitlines()
    assert "route to 10.0.0.3: eth1, source 10.0.0.2" in human.stdout
    exported = node.ddpkit("nics", "--to", "10.0.0.3:29500", "--export")
    assert exported.stdout.splitlines() == [
        "export NCCL_SOCKET_IFNAME==eth1",
        "export GLOO_SOCKET_IFNAME=eth1",
    ]


def test_without_to_the_ranking_also_picks_eth1(node: Node) -> None:
    proc = node.ddpkit("nics", "--json")
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)["recommendation"]
    assert rec["interface"] == "eth1" and "eth0 (docker-default-subnet)" in rec["reason"]


def test_a_peer_behind_the_default_route_warns_about_eth0(node: Node) -> None:
    # Only a routing-table lookup: `ip route get` and the kernel; no packet leaves the namespace.
    proc = node.ddpkit("nics", "--to", "203.0.113.10", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["route"]["ifname"] == "eth0" and doc["route"]["gateway"] == "172.17.0.1"
    assert [t["id"] for t in doc["recommendation"]["traps"]] == ["docker-default-subnet"]
    assert "warning: the route to 203.0.113.10 uses eth0" in proc.stderr


def test_an_unreachable_peer_is_no_route(node: Node) -> None:
    sh("ip", "-n", node.ns, "route", "del", "default")
    proc = node.ddpkit("nics", "--to", "203.0.113.10")
    assert proc.returncode == 5  # ExitCode.NETWORK
    assert "error [no-route]" in proc.stderr and "Network is unreachable" in " ".join(proc.stderr.split())
