"""Findings about the network between the ranks: interfaces, ports, firewalls, InfiniBand."""

from __future__ import annotations

from ddpkit.doctor.catalogue.base import Entry
from ddpkit.i18n import _

ENTRIES = (
    Entry(
        "wrong-interface", "error",
        _("Ranks advertise an address their peers cannot reach"),
        _("NCCL's bootstrap (or Gloo, or the c10d store) picked a network interface whose address "
        "the other machines cannot connect to: loopback, a container/NAT bridge such as Docker's "
        "172.17.0.0/16 (often the very same address on every rented instance), a link-local "
        "address, a tunnel, or a hostname that resolves to 127.0.x. Rank 0's address travels to "
        "every rank, so every peer dials it and is refused or times out."),
        _("Use the private NIC on every node, in NCCL's exact-match form:\n"
        "  export NCCL_SOCKET_IFNAME==eth1 GLOO_SOCKET_IFNAME=eth1\n"
        "or persist it: ddpkit nccl-conf set NCCL_SOCKET_IFNAME==eth1\n"
        "Not sure which NIC? ddpkit nics --to <master-addr>"),
        "`Bootstrap : Using <if>:<addr>` / `NET/Socket : Using ...` on an unreachable address "
        "class, together with `Connection refused`/timeouts; certain when another node was "
        "refused by (or timed out on) the very address rank 0 bootstrapped on, or when two nodes "
        "bootstrap on the same address. Gloo/c10d errors naming a loopback or docker-bridge "
        "`remote=` address count too, as do Gloo's `Unable to resolve hostname ... Using the "
        "loopback address as fallback` followed by refused connects, a static rendezvous "
        "client (torchrun's `static_tcp_rendezvous.py` in its traceback: node rank 1 or more) "
        "whose store dial to loopback failed, and (a warning) a "
        "`NET/Socket : Using` list that mixes a routable interface with bridges, veths or "
        "link-local addresses, also when posted one interface per line; the master address a "
        "launcher names (DeepSpeed's `cmd = ... --master_addr=X`, torchrun's launch configs, "
        "`MASTER_ADDR=X`) of loopback, Docker's bridge or link-local in a failed job over "
        "several machines.",
        100,
    ),
    Entry(
        "interface-not-found", "error",
        _("The requested socket interface does not exist here"),
        _("NCCL_SOCKET_IFNAME or GLOO_SOCKET_IFNAME names an interface that does not exist on this "
        "node (or matches nothing usable), so the rank cannot open its bootstrap socket. NCCL "
        "treats the value as a list of prefixes unless it starts with '='; Gloo wants exact names."),
        _("List this node's interfaces and their addresses: ddpkit nics\n"
        "then set a name that exists on this node (names may differ per node), e.g.\n"
        "  export NCCL_SOCKET_IFNAME==eth1 GLOO_SOCKET_IFNAME=eth1"),
        "`NCCL WARN Bootstrap : no socket interface found`, `NET/Socket : no interface found`, "
        "Gloo's `Unable to find address for: <name>`.",
        98,
    ),
    Entry(
        "container-network", "error",
        _("The nodes run in containers on isolated bridge networks"),
        _("Every address the ranks could use is a container bridge address (such as Docker's "
        "172.17.0.0/16). Such networks exist only inside one host: containers on different "
        "machines cannot reach each other through them, whatever interface is chosen."),
        _("Run the containers on the host's network (and IPC namespace):\n"
        "  docker run --network host --ipc host ...\n"
        "or give them a routable network (macvlan/SR-IOV), then check with:\n"
        "  ddpkit doctor --nnodes <N> --node-rank <R> --master-addr <addr>"),
        "All interfaces in `NET/Socket : Using ...` lines are container-bridge addresses and "
        "connections between nodes fail.",
        97,
    ),
    Entry(
        "port-in-use", "error",
        _("The master/rendezvous port is already taken"),
        _("The rendezvous store (TCPStore) could not listen on its port because another process "
        "already holds it: often a second job on the default port 29500, or a previous run that "
        "has not exited yet."),
        _("Pick a free port on the master and pass the same one on every node: --master-port 29501\n"
        "See who holds the port: ss -ltnp 'sport = :29500'"),
        "`Address already in use`, `EADDRINUSE`, `errno: 98` from the c10d store or torchrun.",
        95,
    ),
    Entry(
        "ib-error", "error",
        _("InfiniBand/RDMA (verbs) errors"),
        _("NCCL's InfiniBand transport failed: a verbs call (ibv_*) returned an error, a work "
        "completion came back with an error status, memory could not be registered (usually the "
        "locked-memory limit, `ulimit -l`), or GPUDirect RDMA is not usable."),
        _("Raise the locked-memory limit: ulimit -l unlimited (docker: --ulimit memlock=-1)\n"
        "Check the HCA and port state: ibv_devinfo; choose one with NCCL_IB_HCA=mlx5_0\n"
        "To confirm it is IB: export NCCL_IB_DISABLE=1 (falls back to TCP sockets)"),
        "`ibv_*` failures, `NET/IB : Got completion ... with error`, `IBV_WC_*` statuses, "
        "`RLIMIT_MEMLOCK`, `Cannot allocate memory` from ibv_reg_mr; TensorPipe's "
        "`tensorpipe/common/ibv.h` (torch's RPC) failing.",
        89,
    ),
    Entry(
        "firewall", "error",
        _("Connections between nodes time out (packets are dropped)"),
        _("Connection attempts to a peer time out instead of being refused: something between the "
        "nodes (a firewall, a security group, a wrong route) silently drops the packets. NCCL "
        "also opens further TCP connections on random ports after its bootstrap, so allowing "
        "only the master port is not enough."),
        _("Allow all TCP traffic between the nodes on the private network (security group / "
        "ufw / iptables), or narrow NCCL's ports with net.ipv4.ip_local_port_range and allow "
        "that range.\n"
        "Check the path: ddpkit nics --to <peer-addr>, then ddpkit doctor --nnodes <N> "
        "--node-rank <R> --master-addr <addr>"),
        "`Connection timed out` (ETIMEDOUT) connecting to a routable address; NCCL init that "
        "starts and never completes without any error; a service mesh's sidecar (Envoy's "
        "`cluster inbound|<port>||` in Istio's pods) intercepting the training pods' ports.",
        75,
    ),
    Entry(
        "peer-unreachable", "error",
        _("A peer or the master cannot be reached"),
        _("Connections to a peer or to the master's store were refused or failed, and nothing more "
        "specific explains it: the master is not running (yet), listens on another address or "
        "port, the address is wrong, or the peer already exited."),
        _("Check that the master runs and that every node uses its reachable (private) address "
        "and the same port:\n"
        "  ddpkit nics --to <master-addr>\n"
        "  ddpkit doctor --nnodes <N> --node-rank <R> --master-addr <master-addr>"),
        "`Connection refused`, `No route to host`, `Network is unreachable`, c10d `The client "
        "socket has timed out ... while trying to connect to (host, port)`.",
        70,
    ),
)
