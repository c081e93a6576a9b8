"""Pure: how the nodes differ, side by side, and how much each difference matters.

Versions that must match across nodes (torch, NCCL) are errors; other versions, GPU counts and
NCCL_*/GLOO_* settings are warnings, except the settings that select a transport or an algorithm,
which every rank must agree on, and the ones that are per node by nature (which interface, which
HCA, where the debug log goes), which are only shown. Two nodes with one hostname are a finding
although nothing "differs": torchrun's c10d rendezvous and MASTER_ADDR go by hostname.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddpkit.doctor.cluster.model import Fingerprint
from ddpkit.doctor.findings import Severity
from ddpkit.i18n import _, _n
from ddpkit.wording import clauses

UNSET = "unset"

# (field, severity, catalogue id, why it matters)
VERSION_FIELDS: tuple[tuple[str, Severity, str, str], ...] = (
    ("torch", "error", "version-mismatch",
     _("torch.distributed's wire formats (c10d store, Gloo, NCCL bindings) are only guaranteed "
       "between identical torch versions")),
    ("nccl", "error", "version-mismatch",
     _("NCCL ranks of different versions may disagree on the protocol and fail or hang at "
       "init")),
    ("cuda", "warning", "version-mismatch",
     _("torch was built for different CUDA versions: different builds often bundle different "
       "NCCLs")),
    ("driver", "warning", "version-mismatch",
     _("different NVIDIA drivers: features such as GPUDirect or CUDA versions may differ")),
    ("python", "warning", "version-mismatch",
     _("different Python versions: bytecode, wheels and serialised objects may differ between "
       "nodes")),
    ("ddpkit", "warning", "version-mismatch",
     _("different ddpkit versions: run the same version on every node")),
    ("gpus", "warning", "node-mismatch",
     _("different GPU counts: give every node the --nproc-per-node it can run")),
)

# Per-node by nature: a difference is shown, never counted against the cluster.
PER_NODE_SETTINGS = frozenset({
    "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_OOB_NET_IFNAME",
    "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_CONF_FILE", "NCCL_TOPO_FILE",
    "NCCL_TOPO_DUMP_FILE", "NCCL_GRAPH_FILE", "NCCL_GRAPH_DUMP_FILE", "NCCL_HOSTID",
})
# Every rank must choose the same transport or algorithm, or they talk past each other.
MUST_AGREE_SETTINGS = frozenset({
    "NCCL_IB_DISABLE", "NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_SOCKET_FAMILY", "NCCL_PROTO",
    "NCCL_ALGO", "NCCL_COMM_ID",
})


@dataclass(frozen=True)
class Difference:
    """One thing that is not alike across the nodes, with every node's value."""

    field: str  # "torch", "hostname", "NCCL_IB_DISABLE", ...
    severity: Severity
    finding: str  # the catalogue id it belongs to (version-mismatch, node-mismatch)
    values: tuple[tuple[int, str], ...]  # (rank, value as shown), by rank
    explanation: str

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "severity": self.severity, "id": self.finding,
                "values": {str(rank): value for rank, value in self.values},
                "explanation": self.explanation}


def _groups(values: Mapping[int, str]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for rank in sorted(values):
        groups.setdefault(values[rank], []).append(rank)
    return groups


def describe_groups(values: Mapping[int, str]) -> str:
    """``"2.5.1 on nodes 0, 2; 2.4.0 on node 1"`` (values in order of their first node)."""
    parts: list[str] = []
    for value, ranks in _groups(values).items():
        nodes = ", ".join(str(r) for r in ranks)
        parts.append(_n("{value} on node {nodes}", "{value} on nodes {nodes}", len(ranks),
                        value=value, nodes=nodes))
    return clauses(parts)


def _shown(fingerprint: Fingerprint, name: str) -> str:
    value = dict(fingerprint.env).get(name)
    if value is None:
        return UNSET
    origin = dict(fingerprint.origins).get(name)
    return f"{value} ({origin})" if origin else value


def diff(fingerprints: Mapping[int, Fingerprint]) -> tuple[Difference, ...]:
    """Every difference between the nodes' fingerprints, most severe first, then by field."""
    found: list[Difference] = []
    ranks = sorted(fingerprints)
    for name, severity, finding, why in VERSION_FIELDS:
        values = {r: _field(fingerprints[r], name) for r in ranks}
        if len(set(values.values())) > 1:
            found.append(Difference(name, severity, finding, tuple(sorted(values.items())),
                                    _("{name} differs ({groups}): {why}", name=name,
                                      groups=describe_groups(values), why=why)))
    names = sorted({key for fp in fingerprints.values() for key, _ in fp.env})
    for name in names:
        raw = {r: dict(fingerprints[r].env).get(name, UNSET) for r in ranks}
        if len(set(raw.values())) <= 1:
            continue
        shown = {r: _shown(fingerprints[r], name) for r in ranks}
        if name in PER_NODE_SETTINGS:
            severity, why = "info", _("this setting is per node by nature (names may differ)")
        elif name in MUST_AGREE_SETTINGS:
            severity, why = "error", _("every rank must make the same choice here, or ranks "
                                       "pick different transports or algorithms and fail or "
                                       "hang")
        else:
            severity, why = "warning", _("set it alike on every node unless you mean it")
        found.append(Difference(name, severity, "node-mismatch", tuple(sorted(shown.items())),
                                _("{name} differs ({groups}): {why}", name=name,
                                  groups=describe_groups(shown), why=why)))
    hostnames = {r: fingerprints[r].hostname for r in ranks}
    shared = {name: group for name, group in _groups(hostnames).items() if len(group) > 1}
    if shared:
        which = clauses([_("{name!r} on nodes {nodes}", name=name,
                          nodes=", ".join(map(str, group))) for name, group in shared.items()])
        found.append(Difference(
            "hostname", "warning", "node-mismatch", tuple(sorted(hostnames.items())),
            _("several nodes share a hostname ({which}): torchrun's c10d rendezvous and "
              "MASTER_ADDR go by hostname, and logs cannot tell the nodes apart", which=which)))
    order = {"error": 0, "warning": 1, "info": 2}
    return tuple(sorted(found, key=lambda d: (order[d.severity], d.field)))


def _field(fingerprint: Fingerprint, name: str) -> str:
    if name == "gpus":
        return "no nvidia-smi" if fingerprint.gpus is None else str(fingerprint.gpus)
    return str(getattr(fingerprint, name))
