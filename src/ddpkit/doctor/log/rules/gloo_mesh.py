"""Gloo's full mesh failed with nothing else to go on (issue 24).

torch's ``ProcessGroupGloo`` raises ``Gloo connectFullMesh failed with <*>`` when
``gloo::rendezvous::Context::connectFullMesh`` throws: a pair could not connect to the address
its peer advertised through the store. Gloo's tcp ``Pair::connectCallback`` passes the socket
error on as ``<*>``, which is ``no error`` when the asynchronous connect gave up without an
errno. Each rank advertises the address of its Gloo device: the interface
``GLOO_SOCKET_IFNAME`` names, or else the address its hostname resolves to (loopback, with a
warning, when it resolves to none). So when the mesh fails and no line says more (no loopback
address, no refused or timed-out connect this log explains otherwise), the advertised address is
the setting in play: the same wrong-interface finding as the loopback case, its text saying what
was and was not seen, and naming a firewall as the other cause.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.i18n import _


def gloo_mesh_failed(mesh_failed: Bag, connect_errors: int) -> Finding | None:
    """A wrong-interface finding for a bare ``connectFullMesh`` failure; None when the log shows
    no such failure, or shows connect errors that other rules read."""
    if not mesh_failed or connect_errors:
        return None
    e = entry("wrong-interface")
    text = _("Gloo's full mesh failed (torch's ProcessGroupGloo: connectFullMesh) and the log "
             "names no peer address: a rank could not connect to the address another rank "
             "advertised. Gloo advertises the address of GLOO_SOCKET_IFNAME's interface, or "
             "else the address this host's name resolves to, which on machines with several "
             "interfaces (a bond, a container bridge, a management NIC) is often one the other "
             "nodes cannot reach. A firewall between the nodes gives the same line. {explanation}",
             explanation=e.explanation)
    fix = _("Name the interface that reaches the other nodes, on every node:\n"
            "  export GLOO_SOCKET_IFNAME=<that interface> NCCL_SOCKET_IFNAME==<that interface>\n"
            "Find it with: ddpkit nics --to <master-addr>   (ddpkit launch sets both for you)\n"
            "If it is already set, check that the nodes accept connections on any port "
            "from each other (Gloo picks random ports): ddpkit doctor --nnodes <N>")
    return Finding(e.id, "error", e.title, text, fix, merge(mesh_failed.items))
