"""Two machines NCCL takes for one (issue 12): read from its intra-node connection lines.

NCCL connects ranks it believes share a machine over P2P or shared memory and names each end's
GPU in brackets (``2[2] -> 3[3] via P2P/IPC``: the CUDA device before 2.5, the bus id after). On
one machine two ranks never hold the same GPU (NCCL refuses that since 2.5), so two ranks with
the same bracket under one hostname are on two machines that NCCL grouped as one: the hostnames
are equal, or equal up to the first dot (NCCL before 2.4 cut them there), or containers share a
host hash. The line format is read with and without the ``NCCL`` word (releases before 2.4 do
not print it).
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.evidence import Bag, Capped, merge
from ddpkit.doctor.log.scan import Event
from ddpkit.doctor.wording import specific_then_general
from ddpkit.i18n import _
from ddpkit.wording import clauses


class SharedDevices:
    """Per hostname, which ranks its intra-node links show on which GPU."""

    def __init__(self) -> None:
        self.devices: Capped[str, dict[str, set[str]]] = Capped(64)
        self.bag = Bag()

    def feed(self, event: Event) -> None:
        if event.kind != "nccl-local-link" or not event.host:
            return
        devices = self.devices.slot(event.host, dict)
        if devices is None:
            return
        for rank_key, device_key in (("src", "srcdev"), ("dst", "dstdev")):
            ranks = devices.setdefault(event.get(device_key), set())
            if len(ranks) < 8 and len(devices) < 256:
                ranks.add(event.get(rank_key))
        self.bag.add(event)

    def finding(self) -> Finding | None:
        clashes = []
        for host, devices in sorted(self.devices.items()):
            shared = sorted((d, sorted(r, key=int)) for d, r in devices.items() if len(r) > 1)
            if shared:
                device, ranks = shared[0]
                clashes.append(_("on {host}, ranks {ranks} both hold GPU [{device}] and NCCL "
                                 "linked them as local peers", host=host,
                                 ranks=" and ".join(ranks[:2]), device=device))
        if not clashes:
            return None
        e = entry("node-mismatch")
        text = _("NCCL treated ranks of two machines as one machine: {clashes}. One machine "
                 "never has two ranks on one GPU, so these ranks run on different machines that "
                 "NCCL grouped together (equal hostnames, hostnames equal up to the first dot in "
                 "NCCL before 2.4, or containers sharing a host hash), and it tried P2P or shared "
                 "memory to a GPU on another machine.", clashes=clauses(clashes[:3]))
        fix = _("Give every machine a distinct hostname (up to the first dot for NCCL < 2.4), or "
                "set NCCL_HOSTID to a different value on each machine; upgrading NCCL also fixes "
                "the prefix case.\nThen compare the nodes: ddpkit doctor --nnodes <N> "
                "--node-rank <R> --master-addr <addr>")
        return Finding(e.id, "error", e.title, specific_then_general(text, e.explanation), fix,
                       merge(self.bag.items))
