"""Pure: a ``SimSpec`` -> the names and addresses of its nodes and the ordered steps that build it.

Every name a cluster uses is derived from its name here, so ``down`` can find a half-built cluster's
pieces without any record of them:

==================  =====================================  ==================================
thing               name                                   where
==================  =====================================  ==================================
node I              ``<name>-n<I>``                        network namespace
dead end            ``<name>-void``                        namespace holding the eth0 far ends
bridge              ``<name>-br``                          host; the host's address is .1
eth1 far end        ``<name>h<I>b``                        host, a port of the bridge
eth0 far end        ``<name>h<I>a``                        ``<name>-void``
hosts file          ``/etc/netns/<name>-n<I>/hosts``       ``ip netns exec`` mounts it on /etc/hosts
hostname            ``/run/ddpkit-sim/<name>/uts-n<I>``    a persistent UTS namespace
==================  =====================================  ==================================
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ddpkit.i18n import _
from ddpkit.sim import shaping
from ddpkit.sim.spec import PUBLIC_ADDRESS, PUBLIC_IFNAME, PUBLIC_PREFIXLEN, SimSpec
from ddpkit.sim.steps import Step

NETNS_DIR = "/run/netns"
ETC_NETNS_DIR = "/etc/netns"
RUNTIME_ROOT = "/run/ddpkit-sim"
IFNAME_MAX = 15  # IFNAMSIZ - 1


@dataclass(frozen=True)
class SimNode:
    """One node: a namespace with ``eth0`` (public, isolated) and a private NIC on the bridge."""

    index: int
    namespace: str
    hostname: str
    private_ifname: str
    private_address: str
    public_address: str
    public_ifname: str
    prefixlen: int
    uts_file: str
    host_private_peer: str  # the eth1 veth's end on the host bridge
    void_public_peer: str  # the eth0 veth's end in the dead-end namespace
    private: bool = True  # False: no private NIC (--no-private-network); its names are unused

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "namespace": self.namespace,
            "hostname": self.hostname,
            "private_ifname": self.private_ifname if self.private else None,
            "private_address": self.private_address if self.private else None,
            "prefixlen": self.prefixlen,
            "public_ifname": self.public_ifname,
            "public_address": self.public_address,
        }


@dataclass(frozen=True)
class SimCluster:
    """A cluster's full layout: what ``up`` builds and ``status`` reports."""

    spec: SimSpec
    nodes: tuple[SimNode, ...]
    host_address: str
    bridge: str
    void_namespace: str
    runtime_dir: str

    @property
    def name(self) -> str:
        return self.spec.name

    def node(self, index: int) -> SimNode:
        return self.nodes[index]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "spec": self.spec.to_dict(),
            "host_address": self.host_address,
            "bridge": self.bridge,
            "nodes": [node.to_dict() for node in self.nodes],
        }


# -- names ---------------------------------------------------------------------------------------


def namespace_name(cluster: str, index: int) -> str:
    return f"{cluster}-n{index}"


def void_namespace_name(cluster: str) -> str:
    return f"{cluster}-void"


def probe_namespace_name(cluster: str) -> str:
    return f"{cluster}-probe"


def bridge_name(cluster: str) -> str:
    return f"{cluster}-br"


def host_private_peer_name(cluster: str, index: int) -> str:
    return f"{cluster}h{index}b"


def void_public_peer_name(cluster: str, index: int) -> str:
    return f"{cluster}h{index}a"


def node_hostname(index: int) -> str:
    return f"node{index}"


def runtime_dir(cluster: str) -> str:
    return f"{RUNTIME_ROOT}/{cluster}"


def uts_file(cluster: str, index: int) -> str:
    return f"{runtime_dir(cluster)}/uts-n{index}"


def hosts_dir(namespace: str) -> str:
    return f"{ETC_NETNS_DIR}/{namespace}"


def owned_namespace_pattern(cluster: str) -> re.Pattern[str]:
    """Every namespace name ``cluster`` may have made (cluster names contain no ``-``)."""
    return re.compile(rf"{re.escape(cluster)}-(n\d+|void|probe)")


def owned_link_pattern(cluster: str) -> re.Pattern[str]:
    """Every host link name ``cluster`` may have made."""
    return re.compile(rf"{re.escape(cluster)}(-br|h\d+[ab])")


# -- layout --------------------------------------------------------------------------------------


def build_cluster(spec: SimSpec) -> SimCluster:
    network = spec.network
    nodes = tuple(
        SimNode(
            index=index,
            namespace=namespace_name(spec.name, index),
            hostname=node_hostname(index),
            private_ifname=spec.private_ifname(index),
            private_address=str(network.network_address + 2 + index),
            public_address=PUBLIC_ADDRESS,
            public_ifname=PUBLIC_IFNAME,
            prefixlen=network.prefixlen,
            uts_file=uts_file(spec.name, index),
            host_private_peer=host_private_peer_name(spec.name, index),
            void_public_peer=void_public_peer_name(spec.name, index),
            private=spec.private_network,
        )
        for index in range(spec.nodes)
    )
    return SimCluster(
        spec=spec,
        nodes=nodes,
        host_address=str(network.network_address + 1),
        bridge=bridge_name(spec.name),
        void_namespace=void_namespace_name(spec.name),
        runtime_dir=runtime_dir(spec.name),
    )


def hosts_file_text(node: SimNode) -> str:
    """/etc/hosts inside a node: localhost and the node's own name on its public address, no peers."""
    return (
        "# ddpkit sim: as on a rented container, the hostname resolves to the eth0 address\n"
        "127.0.0.1\tlocalhost\n"
        "::1\tlocalhost ip6-localhost ip6-loopback\n"
        f"{node.public_address}\t{node.hostname}\n"
    )


def node_argv(cluster: SimCluster, index: int, argv: Sequence[str]) -> list[str]:
    """The command line that runs ``argv`` inside node ``index`` (its network and its hostname)."""
    if not 0 <= index < len(cluster.nodes):
        raise IndexError(f"cluster {cluster.name} has nodes 0..{len(cluster.nodes) - 1}, not {index}")
    node = cluster.nodes[index]
    return ["ip", "netns", "exec", node.namespace, "nsenter", f"--uts={node.uts_file}", "--", *argv]


def plan_up(spec: SimSpec) -> tuple[Step, ...]:
    """Every step of ``up`` in order. Deleting the namespaces and the bridge undoes all of them."""
    cluster = build_cluster(spec)
    steps: list[Step] = []
    void = cluster.void_namespace
    steps.append(Step(_("create dead-end namespace {name}", name=void), ("ip", "netns", "add", void)))
    bridge_steps: list[Step] = []
    bridge, prefix = cluster.bridge, spec.network.prefixlen
    bridge_steps += [
        Step(_("create bridge {bridge}", bridge=bridge), ("ip", "link", "add", bridge, "type", "bridge")),
        Step(
            _("give the host {address} on {bridge}", address=cluster.host_address, bridge=bridge),
            ("ip", "addr", "add", f"{cluster.host_address}/{prefix}", "dev", bridge),
        ),
        Step(
            _("stop the host forwarding anything that arrives on {bridge}", bridge=bridge),
            path=f"/proc/sys/net/ipv4/conf/{bridge}/forwarding",
            content="0\n",
        ),
        Step(_("bring {device} up", device=bridge), ("ip", "link", "set", bridge, "up")),
    ]
    steps += bridge_steps if spec.private_network else []
    for node in cluster.nodes:
        steps += _node_steps(cluster, node)
    return tuple(steps)


def _node_steps(cluster: SimCluster, node: SimNode) -> list[Step]:
    ns, spec = node.namespace, cluster.spec
    public, private = node.public_ifname, node.private_ifname
    steps = [
        Step(_("create namespace {ns}", ns=ns), ("ip", "netns", "add", ns)),
        Step(_("bring lo up in {ns}", ns=ns), ("ip", "-n", ns, "link", "set", "lo", "up")),
        Step(
            _("create {ns}'s {nic} (far end {peer} in {void})", ns=ns, nic=public,
              peer=node.void_public_peer, void=cluster.void_namespace),
            ("ip", "link", "add", node.void_public_peer, "netns", cluster.void_namespace,
             "type", "veth", "peer", "name", public, "netns", ns),
        ),
        Step(
            _("bring {device} up, unaddressed", device=node.void_public_peer),
            ("ip", "-n", cluster.void_namespace, "link", "set", node.void_public_peer, "up"),
        ),
        Step(
            _("give {ns}'s {nic} {address}", ns=ns, nic=public,
              address=node.public_address + "/" + str(PUBLIC_PREFIXLEN)),
            ("ip", "-n", ns, "addr", "add", f"{node.public_address}/{PUBLIC_PREFIXLEN}",
             "dev", public),
        ),
        Step(_("bring {ns}'s {nic} up", ns=ns, nic=public), ("ip", "-n", ns, "link", "set", public, "up")),
    ]
    private_steps = [
        Step(
            _("create {ns}'s {nic} (far end {peer} on the host)", ns=ns, nic=private,
              peer=node.host_private_peer),
            ("ip", "link", "add", node.host_private_peer, "type", "veth",
             "peer", "name", private, "netns", ns),
        ),
        Step(
            _("plug {device} into {bridge}", device=node.host_private_peer, bridge=cluster.bridge),
            ("ip", "link", "set", node.host_private_peer, "master", cluster.bridge),
        ),
        Step(_("bring {device} up", device=node.host_private_peer),
             ("ip", "link", "set", node.host_private_peer, "up")),
        Step(
            _("give {ns}'s {nic} {address}", ns=ns, nic=private,
              address=node.private_address + "/" + str(node.prefixlen)),
            ("ip", "-n", ns, "addr", "add", f"{node.private_address}/{node.prefixlen}",
             "dev", private),
        ),
        Step(_("bring {ns}'s {nic} up", ns=ns, nic=private), ("ip", "-n", ns, "link", "set", private, "up")),
    ]
    steps += private_steps if node.private else []
    steps += shaping.egress_steps(spec, device=private, namespace=ns)
    steps += shaping.egress_steps(spec, device=node.host_private_peer, namespace=None)
    steps += [
        Step(_("write {ns}'s /etc/hosts", ns=ns), path=f"{hosts_dir(ns)}/hosts",
             content=hosts_file_text(node)),
        Step(_("create {ns}'s UTS namespace file", ns=ns), path=node.uts_file, content=""),
        Step(
            _("set {ns}'s hostname to {hostname}", ns=ns, hostname=node.hostname),
            ("unshare", f"--uts={node.uts_file}", "hostname", node.hostname),
        ),
    ]
    return steps


def tools_for_up(spec: SimSpec) -> tuple[str, ...]:
    """The tools ``plan_up(spec)`` runs, sorted (with the one ``unshare`` runs inside itself)."""
    tools = set()
    for step in plan_up(spec):
        if step.argv:
            tools.add(step.argv[0])
            if step.argv[0] == "unshare":
                tools.add(next(word for word in step.argv[1:] if not word.startswith("-")))
    return tuple(sorted(tools))
