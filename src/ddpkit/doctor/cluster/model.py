"""What the nodes of a cluster doctor run tell each other, and how it travels (JSON bytes only).

Every value in the meeting store is one of these records as JSON bytes. ``from_dict`` checks the
shape of what another node sent and raises ``ValueError`` on anything malformed, so a node running
another ddpkit version fails with a message instead of a traceback.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ddpkit.launch.store_value import parse_json_dict

WIRE_VERSION = 1  # bumped whenever a record's shape changes

PathStatus = Literal[
    "ok",  # the right node answered and saw the address the prober meant to use
    "refused",  # nothing listens at that address (or it is the prober's own address, unused)
    "timeout",  # no answer within the connect timeout: dropped, black-holed, a wrong route
    "no-route",  # the kernel has no route from this source to that address
    "no-source",  # the source address cannot be bound here
    "self",  # the prober reached its own listener: the address is (also) its own
    "other-node",  # a different node answered: the address belongs to several nodes
    "nat",  # the right node answered but saw another source address: NAT or a wrong route
    "bad-answer",  # something answered that is not a ddpkit doctor listener
    "error",  # any other socket error (detail says which)
    "not-probed",  # the prober never reported (it stopped, or the probe phase ran out of time)
]


def _require(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise ValueError(f"field {key!r} is missing or not {getattr(kind, '__name__', kind)}")
    return value


def _optional(data: Mapping[str, Any], key: str, kind: type) -> Any:
    value = data.get(key)
    if value is not None and not isinstance(value, kind):
        raise ValueError(f"field {key!r} is not {kind.__name__}")
    return value


def _string_pairs(data: Mapping[str, Any], key: str) -> tuple[tuple[str, str], ...]:
    value = data.get(key) or {}
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"field {key!r} is not a mapping of strings")
    return tuple(sorted(value.items()))


def family_of(address: str) -> Literal["ipv4", "ipv6"]:
    return "ipv4" if ipaddress.ip_address(address).version == 4 else "ipv6"


def normalise_address(address: str) -> str:
    """``::ffff:10.0.0.2`` -> ``10.0.0.2``; zones dropped; compressed form. Unparsable: unchanged."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return ip.compressed


@dataclass(frozen=True)
class Candidate:
    """One interface a node could use for inter-node traffic, with the address peers would dial.

    ``preference`` is the node's own ranking (``ddpkit.net.select.ranking``; 0 = best); interfaces
    the ranking rejects (traps) come after every usable one but are probed all the same.
    """

    ifname: str
    address: str
    kind: str
    preference: int
    traps: tuple[str, ...] = ()
    prefixlen: int | None = None  # the address's network (None: a node that did not say)

    @property
    def family(self) -> Literal["ipv4", "ipv6"]:
        return family_of(self.address)

    def to_dict(self) -> dict[str, Any]:
        return {"ifname": self.ifname, "address": self.address, "kind": self.kind,
                "preference": self.preference, "traps": list(self.traps),
                "prefixlen": self.prefixlen}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Candidate:
        address = _require(data, "address", str)
        try:
            ipaddress.ip_address(address)
        except ValueError as exc:
            raise ValueError(f"candidate address {address!r} is not an IP address") from exc
        traps = data.get("traps") or []
        if not isinstance(traps, list) or not all(isinstance(t, str) for t in traps):
            raise ValueError("field 'traps' is not a list of strings")
        prefixlen = _optional(data, "prefixlen", int)
        if prefixlen is not None and not 0 <= prefixlen <= 128:
            raise ValueError(f"candidate prefixlen {prefixlen!r} is out of range")
        return cls(_require(data, "ifname", str), address, _require(data, "kind", str),
                   _require(data, "preference", int), tuple(traps), prefixlen)


@dataclass(frozen=True)
class Fingerprint:
    """What must (or should) be alike on every node. Strings, ``"n/a"`` where not applicable."""

    hostname: str
    python: str
    torch: str
    cuda: str  # the CUDA version torch was built for
    nccl: str
    driver: str
    gpus: int | None  # None: no nvidia-smi on this node
    ddpkit: str
    env: tuple[tuple[str, str], ...] = ()  # NCCL_* and GLOO_* settings in effect, by name
    origins: tuple[tuple[str, str], ...] = ()  # name -> where a setting came from, when a file

    def to_dict(self) -> dict[str, Any]:
        return {"hostname": self.hostname, "python": self.python, "torch": self.torch,
                "cuda": self.cuda, "nccl": self.nccl, "driver": self.driver, "gpus": self.gpus,
                "ddpkit": self.ddpkit, "env": dict(self.env), "origins": dict(self.origins)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fingerprint:
        text = {key: _require(data, key, str)
                for key in ("hostname", "python", "torch", "cuda", "nccl", "driver", "ddpkit")}
        return cls(gpus=_optional(data, "gpus", int), env=_string_pairs(data, "env"),
                   origins=_string_pairs(data, "origins"), **text)


@dataclass(frozen=True)
class NodeRecord:
    """A node's entry in the meeting: who it is, where its echo listener is, what it looks like.

    ``nonce`` is random per run and node; the listener repeats it, so an answer proves which
    node's listener it came from (an address shared by several nodes cannot fool the matrix).
    """

    rank: int
    nnodes: int
    nonce: str
    ports: tuple[tuple[str, int], ...]  # (family, listener port), e.g. (("ipv4", 41234),)
    candidates: tuple[Candidate, ...]
    fingerprint: Fingerprint

    @property
    def hostname(self) -> str:
        return self.fingerprint.hostname

    def port_for(self, family: str) -> int | None:
        return dict(self.ports).get(family)

    def candidate(self, ifname: str) -> Candidate | None:
        return next((c for c in self.candidates if c.ifname == ifname), None)

    def to_dict(self) -> dict[str, Any]:
        return {"wire": WIRE_VERSION, "rank": self.rank, "nnodes": self.nnodes,
                "nonce": self.nonce, "ports": dict(self.ports),
                "candidates": [c.to_dict() for c in self.candidates],
                "fingerprint": self.fingerprint.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeRecord:
        _check_wire(data)
        ports = data.get("ports")
        if not isinstance(ports, Mapping) or not all(
                isinstance(k, str) and isinstance(v, int) for k, v in ports.items()):
            raise ValueError("field 'ports' is not a mapping of family -> port")
        candidates = data.get("candidates")
        fingerprint = data.get("fingerprint")
        if not isinstance(candidates, list) or not all(isinstance(c, Mapping) for c in candidates):
            raise ValueError("field 'candidates' is not a list of objects")
        if not isinstance(fingerprint, Mapping):
            raise ValueError("field 'fingerprint' is not an object")
        return cls(_require(data, "rank", int), _require(data, "nnodes", int),
                   _require(data, "nonce", str), tuple(sorted(ports.items())),
                   tuple(Candidate.from_dict(c) for c in candidates),
                   Fingerprint.from_dict(fingerprint))


@dataclass(frozen=True)
class PathResult:
    """One probe: node ``src`` dialled node ``dst``'s ``dst_address`` from its ``src_address``."""

    src: int
    src_ifname: str
    src_address: str
    dst: int
    dst_ifname: str
    dst_address: str
    status: PathStatus
    detail: str = ""
    seen: str | None = None  # the source address the listener reported

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def key(self) -> tuple[int, str, int, str]:
        return (self.src, self.src_ifname, self.dst, self.dst_ifname)

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.src, "from_interface": self.src_ifname,
                "from_address": self.src_address, "to": self.dst,
                "to_interface": self.dst_ifname, "to_address": self.dst_address,
                "status": self.status, "ok": self.ok, "detail": self.detail, "seen": self.seen}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PathResult:
        status = _require(data, "status", str)
        if status not in PathStatus.__args__:  # type: ignore[attr-defined]
            raise ValueError(f"unknown path status {status!r}")
        return cls(_require(data, "from", int), _require(data, "from_interface", str),
                   _require(data, "from_address", str), _require(data, "to", int),
                   _require(data, "to_interface", str), _require(data, "to_address", str),
                   status, str(data.get("detail") or ""), _optional(data, "seen", str))


@dataclass(frozen=True)
class ProbeReport:
    """A node's probe results, or why it probed nothing (``skipped``)."""

    rank: int
    results: tuple[PathResult, ...] = ()
    skipped: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"wire": WIRE_VERSION, "rank": self.rank, "skipped": self.skipped,
                "results": [r.to_dict() for r in self.results]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProbeReport:
        _check_wire(data)
        results = data.get("results")
        if not isinstance(results, list) or not all(isinstance(r, Mapping) for r in results):
            raise ValueError("field 'results' is not a list of objects")
        return cls(_require(data, "rank", int), tuple(PathResult.from_dict(r) for r in results),
                   str(data.get("skipped") or ""))


def _check_wire(data: Mapping[str, Any]) -> None:
    if data.get("wire") != WIRE_VERSION:
        raise ValueError(f"wire version {data.get('wire')!r}, this node speaks {WIRE_VERSION}: "
                         "run the same ddpkit version on every node")


def encode(value: NodeRecord | ProbeReport | Mapping[str, Any]) -> bytes:
    """A record as the JSON bytes stored in the meeting store."""
    body = value if isinstance(value, Mapping) else value.to_dict()
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def decode_record(raw: bytes | bytearray | Sequence[int]) -> dict[str, Any]:
    """JSON bytes from the store -> a dict; ``ValueError`` (NotOurs) when they are not a JSON
    object within the bounds every store value is held to (:mod:`ddpkit.launch.store_value`)."""
    return parse_json_dict(bytes(raw))
