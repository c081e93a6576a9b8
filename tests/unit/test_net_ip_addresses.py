"""Interface addresses from iproute2 (``ip -j addr show``), the source ``ddpkit nics`` uses so it
never imports psutil: the same addresses psutil reports, and None (psutil then) when ``ip`` fails.

tests/fixtures/net/ip-addr-show.json is real iproute2 output recorded on a test machine (loopback,
an eth0 with IPv4, a ULA and a link-local IPv6, a bridge and veth ends of a simulated cluster)."""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

from ddpkit.net.facts import _addresses_by_interface, ip_addresses
from ddpkit.net.iproute import IpCommandError

RECORDED = (Path(__file__).resolve().parents[1] / "fixtures" / "net" / "ip-addr-show.json").read_text()


def _from(text: str):  # type: ignore[no-untyped-def]
    return lambda argv: text


def _psutil_shaped(rows: list[dict]) -> dict[str, list[SimpleNamespace]]:  # type: ignore[type-arg]
    """The recorded rows as psutil.net_if_addrs() would give them (netmask strings, families)."""
    out: dict[str, list[SimpleNamespace]] = {}
    for row in rows:
        for info in row.get("addr_info", []):
            family = socket.AF_INET if info["family"] == "inet" else socket.AF_INET6
            bits = 32 if family == socket.AF_INET else 128
            mask_int = (1 << bits) - (1 << (bits - info["prefixlen"]))
            mask = str(ipaddress.ip_address(mask_int) if bits == 32 else
                       ipaddress.IPv6Address(mask_int))
            out.setdefault(row["ifname"], []).append(
                SimpleNamespace(family=family, address=info["local"], netmask=mask))
    return out


def test_recorded_output_gives_every_address_with_its_prefix() -> None:
    found = ip_addresses(_from(RECORDED))
    assert found is not None
    rows = json.loads(RECORDED)
    expected = sum(1 for row in rows for info in row.get("addr_info", [])
                   if info["family"] in ("inet", "inet6"))
    assert sum(len(v) for v in found.values()) == expected
    assert {"family": "ipv4", "address": "127.0.0.1", "prefixlen": 8} in found["lo"]
    assert set(found) == {row["ifname"] for row in rows}


def test_the_same_addresses_as_psutil_reports() -> None:
    rows = json.loads(RECORDED)
    via_ip = ip_addresses(_from(RECORDED)) or {}
    via_psutil = _addresses_by_interface(_psutil_shaped(rows), {row["ifname"] for row in rows})

    def norm(d: dict) -> dict:  # type: ignore[type-arg]
        return {k: sorted((e["family"], e["address"], e["prefixlen"]) for e in v)
                for k, v in d.items() if v}

    assert norm(via_ip) == norm(via_psutil) != {}


def test_a_missing_or_failing_ip_gives_none() -> None:
    def missing(argv: Sequence[str]) -> str:
        raise FileNotFoundError(2, "No such file or directory", "ip")

    def failing(argv: Sequence[str]) -> str:
        raise IpCommandError(argv, 1, "Object \"addr\" is unknown")

    assert ip_addresses(missing) is None
    assert ip_addresses(failing) is None
    assert ip_addresses(_from("not json")) is None
    assert ip_addresses(_from('{"ifname": "eth0"}')) is None
    assert ip_addresses(_from('[{"addr_info": []}]')) is None
