"""``ddpkit.sim``: a rehearsal cluster of network-namespace nodes on one machine (root only).

Each node looks like a rented GPU container: ``eth0`` with the same 172.17.0.4 everywhere (reaching
nothing), a private NIC on a shared bridge, its own hostname resolving to eth0. See docs/sim.md.

    cluster = up(SimSpec(nodes=2, rate="1gbit"))
    subprocess.run(node_argv(cluster, 1, ["hostname"]))   # -> node1
    down(cluster.name)
"""

from ddpkit.sim.cluster import (
    SimStatus,
    UpResult,
    bring_up,
    down,
    inspect,
    status,
    up,
)
from ddpkit.sim.spec import (
    DEFAULT_NAME,
    DEFAULT_PRIVATE_IFNAME,
    DEFAULT_SUBNET,
    PUBLIC_ADDRESS,
    PUBLIC_IFNAME,
    SimSpec,
    parse_ifname_style,
)
from ddpkit.sim.steps import Step
from ddpkit.sim.teardown import DownReport
from ddpkit.sim.topology import SimCluster, SimNode, build_cluster, node_argv, plan_up

__all__ = [
    "DEFAULT_NAME",
    "DEFAULT_PRIVATE_IFNAME",
    "DEFAULT_SUBNET",
    "PUBLIC_ADDRESS",
    "PUBLIC_IFNAME",
    "DownReport",
    "SimCluster",
    "SimNode",
    "SimSpec",
    "SimStatus",
    "Step",
    "UpResult",
    "bring_up",
    "build_cluster",
    "down",
    "inspect",
    "node_argv",
    "parse_ifname_style",
    "plan_up",
    "status",
    "up",
]
