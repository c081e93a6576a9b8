"""torchrun's rendezvous flags (``--rdzv-backend``, ``--rdzv-endpoint``) read as ddpkit's job.

ddpkit always runs torchrun's ``static`` rendezvous: a fixed node count, each node's rank as given,
the store on the master at ``--master-addr:--master-port``. A ``c10d`` line with a fixed
``--nnodes`` (pytorch/examples' multinode tutorial: ``--nnodes=2 --node_rank=0 --rdzv_id=456
--rdzv_backend=c10d --rdzv_endpoint=HOST:PORT``) describes the same job: a TCPStore at HOST:PORT
that every node meets at. So it is mapped onto it, with a note saying so: the endpoint's host is
the master (node 0), its port the master port; torchrun's c10d default port 29400 when the
endpoint has none, as torchrun does. What c10d adds (ranks handed out in arrival order, nodes
joining later, ``MIN:MAX`` node counts) needs an elastic job, which ddpkit does not run.

Pure: the CLI passes the flags in and applies the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ddpkit.errors import UsageError
from ddpkit.i18n import _
from ddpkit.net.ports import DEFAULT_JOIN_PORT, DEFAULT_MASTER_PORT, LARGEST_PORT

STATIC = "static"
C10D = "c10d"
C10D_DEFAULT_PORT = DEFAULT_JOIN_PORT  # torchrun's default port for a c10d endpoint without one
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class Rendezvous:
    """What the rendezvous flags amount to: the master address and port to use (``None``: as
    given), whether this one node runs torchrun's --standalone, and the notes to show."""

    master_addr: str | None
    master_port: int
    standalone: bool = False
    notes: tuple[str, ...] = ()


def read_rendezvous(backend: str | None, endpoint: str | None, *, master_addr: str | None,
                    master_port: int, nnodes: int) -> Rendezvous:
    """``--rdzv-backend``/``--rdzv-endpoint`` against ``--master-addr``/``--master-port``.

    UsageError ``rdzv-backend-conflict`` (etcd, or any other backend), ``rdzv-endpoint-conflict``
    (they name different masters or ports), ``bad-rdzv-endpoint`` (not HOST[:PORT], or port 0 on
    several nodes: the others could never learn the port).
    """
    if backend is not None and backend not in (STATIC, C10D):
        raise UsageError(
            "rdzv-backend-conflict",
            _("--rdzv-backend {backend} cannot work with ddpkit: it runs torchrun's {static} "
              "rendezvous on the master (fixed node count, node ranks as given; {c10d} with a "
              "fixed --nnodes is read that way)", backend=backend, static=STATIC, c10d=C10D),
            _("drop --rdzv-backend and give --nnodes N --node-rank R --master-addr A; or start "
              "the job with plain torchrun for an elastic rendezvous"))
    notes: list[str] = []
    standalone = False
    if endpoint:
        host, port = parse_endpoint(endpoint)
        if port is None and backend == C10D:
            port = C10D_DEFAULT_PORT
        if port == 0:
            if nnodes > 1:
                raise UsageError(
                    "bad-rdzv-endpoint",
                    _("--rdzv-endpoint {endpoint}: port 0 (any free port) on {nnodes} nodes, "
                      "but the other nodes must know the port to meet at", endpoint=endpoint,
                      nnodes=nnodes),
                    _("give a port, e.g. --rdzv-endpoint {host}:{port}", host=host,
                      port=DEFAULT_MASTER_PORT))
            notes.append(_("--rdzv-endpoint {endpoint} (any free port) on one node read as "
                           "--standalone", endpoint=endpoint))
            return Rendezvous(master_addr, master_port, True, tuple(notes))
        if master_addr is not None and master_addr != host:
            raise UsageError("rdzv-endpoint-conflict",
                             _("--rdzv-endpoint {endpoint} and --master-addr {master} name "
                               "different masters", endpoint=endpoint, master=master_addr),
                             _("give only one of them"))
        if port is not None and master_port not in (port, DEFAULT_MASTER_PORT):
            raise UsageError("rdzv-endpoint-conflict",
                             _("--rdzv-endpoint {endpoint} and --master-port {port} name "
                               "different ports", endpoint=endpoint, port=master_port),
                             _("give only one of them"))
        master_addr = host
        master_port = port if port is not None else master_port
        notes.append(_("--rdzv-endpoint {endpoint} read as --master-addr {host} --master-port "
                       "{port}", endpoint=endpoint, host=host, port=master_port))
    if backend == C10D:
        where = f"{master_addr}:{master_port}" if master_addr else _("the master")
        notes.append(
            _("--rdzv-backend {c10d} with a fixed node count ({nnodes}): the same job runs on "
              "torchrun's {static} rendezvous at {where}; each node gives its --node-rank "
              "(0 on the master)", c10d=C10D, nnodes=nnodes, static=STATIC, where=where)
            if nnodes > 1 else
            _("--rdzv-backend {c10d} on one node: torchrun's {static} rendezvous runs it",
              c10d=C10D, static=STATIC))
    elif backend == STATIC:
        notes.append(_("--rdzv-backend {static}: ddpkit's choice too", static=STATIC))
    return Rendezvous(master_addr, master_port, standalone, tuple(notes))


def implied_node_rank(nnodes: int, host: str, holds: Callable[[str], bool]) -> tuple[int, str]:
    """The node rank a c10d line without --node-rank implies, and the note saying so.

    c10d hands out node ranks in arrival order; ddpkit's static job needs each node's rank. With
    2 nodes it follows from the endpoint: the machine that ``holds`` the endpoint's ``host`` is
    the master (node 0), the other node is node 1 (pytorch/tutorials' elastic DDP line gives no
    --node_rank). With more nodes, or a loopback endpoint every node would hold, it does not:
    UsageError ``c10d-node-rank``."""
    fix = _("give --node-rank R on every node (0 on the machine that holds {host})", host=host)
    if host in LOOPBACK_HOSTS:
        raise UsageError("c10d-node-rank", _("--rdzv-endpoint {host} is loopback: every node "
                                             "would hold it, so it cannot tell which node is the "
                                             "master", host=host), fix)
    if nnodes != 2:
        raise UsageError("c10d-node-rank", _("c10d hands out node ranks in arrival order, and "
                                             "with {nnodes} nodes only the master's rank follows "
                                             "from the endpoint; ddpkit's fixed-size job needs "
                                             "every node's rank", nnodes=nnodes), fix)
    if holds(host):
        return 0, _("no --node-rank: this machine holds the rendezvous endpoint {host}, so it is "
                    "node 0 (the master)", host=host)
    return 1, _("no --node-rank: this machine does not hold the rendezvous endpoint {host}, so "
                "it is the other of the 2 nodes, node 1", host=host)


def parse_endpoint(text: str) -> tuple[str, int | None]:
    """``HOST[:PORT]`` (``[v6]:PORT`` too); UsageError ``bad-rdzv-endpoint``."""
    host, sep, port = text.rpartition(":")
    if not sep or "]" in port:
        host, port = text, ""
    host = host.strip("[]")
    if not host or (port and not port.isdigit()) or (port and int(port) > LARGEST_PORT):
        raise UsageError("bad-rdzv-endpoint", _("--rdzv-endpoint {text!r} is not HOST[:PORT]",
                                                 text=text),
                         _("e.g. --rdzv-endpoint 10.0.0.2:29500"))
    return host, int(port) if port else None


ELASTIC_REASON = _(
    "ddpkit runs a fixed-size job (torchrun's static rendezvous, each node's rank as given): "
    "it restarts every node together and checks each node before it waits, which an elastic "
    "group that grows and shrinks would undo")


def fixed_node_count(text: str) -> int:
    """``--nnodes N`` (or ``MIN:MAX`` with MIN == MAX); ValueError with the reason for a range."""
    low, sep, high = text.partition(":")
    if sep and low.strip() == high.strip():
        text = low
    elif sep:
        raise ValueError(_("elastic ranges ({text}) are not supported: {reason}; give a fixed "
                           "count (e.g. --nnodes 2), or run an elastic job with plain torchrun",
                           text=text, reason=ELASTIC_REASON))
    try:
        return int(text)
    except ValueError:
        raise ValueError(_("{text!r} is not a number of machines", text=text)) from None
