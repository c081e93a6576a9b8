"""Route lookup: host parsing, resolution order, recorded `ip -j route get` answers, the fallback.

Recorded answers come from tests/fixtures/net/*.json ("route_get"); the real lookups here only
ever ask about loopback addresses.
"""

from __future__ import annotations

import errno
import json
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ddpkit.errors import ConfigError, ExitCode, NetworkProblem
from ddpkit.net.interfaces import Nic, discover, nics_from_facts
from ddpkit.net.iproute import IpCommandError, run_ip_command
from ddpkit.net.route import (
    Route,
    parse_route_get,
    resolve,
    route_to,
    split_host_port,
    udp_source_address,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "net"


def load(name: str) -> dict[str, Any]:
    facts: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return facts


class RecordedIp:
    """Answers `ip -j route get ADDR` from a fixture's recordings and remembers every argv."""

    def __init__(self, fixture: str) -> None:
        self.answers: dict[str, Any] = load(fixture)["route_get"]
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> str:
        self.calls.append(list(argv))
        address = argv[argv.index("get") + 1]
        if address not in self.answers:
            raise IpCommandError(argv, 2, "RTNETLINK answers: Network is unreachable\n")
        return json.dumps(self.answers[address])


def no_udp(address: str, port: int | None, zone: str) -> str:
    raise AssertionError("the UDP fallback must not run when `ip` answered")


def no_dns(*args: object) -> list[Any]:
    raise AssertionError("a literal address must not be looked up")


# ---- HOST[:PORT] ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("10.0.0.3", ("10.0.0.3", None)),
        ("10.0.0.3:29500", ("10.0.0.3", 29500)),
        ("node-1", ("node-1", None)),
        ("node-1:22", ("node-1", 22)),
        ("fd00::3", ("fd00::3", None)),
        ("[fd00::3]:29500", ("fd00::3", 29500)),
        ("[fe80::1%eth1]", ("fe80::1%eth1", None)),
        ("  10.0.0.3  ", ("10.0.0.3", None)),
    ],
)
def test_split_host_port(spec: str, expected: tuple[str, int | None]) -> None:
    assert split_host_port(spec) == expected


@pytest.mark.parametrize("spec", ["", ":29500", "10.0.0.3:0", "10.0.0.3:70000", "h:x", "[fd00::3", "[::1]x"])
def test_bad_host_specs_are_config_errors(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        split_host_port(spec)
    assert info.value.error_id == "bad-host" and info.value.hint


# ---- resolve ----------------------------------------------------------------------------------


def test_resolve_literal_without_lookup() -> None:
    assert resolve("10.0.0.3", lookup=no_dns) == ("10.0.0.3",)
    assert resolve("FD00:0::3", lookup=no_dns) == ("fd00::3",)
    assert resolve("fe80::1%eth1", lookup=no_dns) == ("fe80::1%eth1",)


def test_resolve_orders_ipv4_first_then_numerically_and_dedupes() -> None:
    def lookup(host: str, port: object, family: int, kind: int) -> list[tuple[Any, ...]]:
        assert host == "node1"
        return [
            (socket.AF_INET6, kind, 6, "", ("fd00::9", 0, 0, 0)),
            (socket.AF_INET, kind, 6, "", ("10.0.0.20", 0)),
            (socket.AF_INET, kind, 6, "", ("10.0.0.3", 0)),
            (socket.AF_INET, kind, 6, "", ("10.0.0.20", 0)),
            (socket.AF_INET6, kind, 6, "", ("fd00::2", 0, 0, 0)),
        ]

    assert resolve("node1", lookup=lookup) == ("10.0.0.3", "10.0.0.20", "fd00::2", "fd00::9")


def test_resolve_failure_is_host_unresolvable() -> None:
    def lookup(*args: object) -> list[Any]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(ConfigError) as info:
        resolve("no-such-node", lookup=lookup)
    assert info.value.error_id == "host-unresolvable"
    assert "no-such-node" in info.value.message and info.value.exit_code == ExitCode.CONFIG


def test_resolve_localhost_via_hosts_file() -> None:
    # /etc/hosts answers this one: no DNS server is asked.
    assert "127.0.0.1" in resolve("localhost")


# ---- recorded `ip -j route get` ----------------------------------------------------------------


def test_parse_route_get_takes_the_first_entry() -> None:
    entry = parse_route_get('[{"dst":"10.0.0.35","dev":"eth1","prefsrc":"10.0.0.34"}]')
    assert entry["dev"] == "eth1"
    for bad in ("[]", "{}", '[{"dst": "x"}]', "not json"):
        with pytest.raises(ValueError):
            parse_route_get(bad)


def test_cloud_peer_on_private_network_routes_via_eth1() -> None:
    nics = nics_from_facts(load("cloud_two_nic"))
    ip = RecordedIp("cloud_two_nic")
    route = route_to("10.0.0.35:29500", nics, run_ip=ip, lookup=no_dns, udp_source=no_udp)
    assert route == Route("10.0.0.35", "10.0.0.35", "ipv4", "eth1", "10.0.0.34", None, False, "ip-route-get")
    assert ip.calls == [["ip", "-j", "route", "get", "10.0.0.35"]]


def test_cloud_default_route_goes_out_eth0_with_gateway() -> None:
    nics = nics_from_facts(load("cloud_two_nic"))
    route = route_to("8.8.8.8", nics, run_ip=RecordedIp("cloud_two_nic"), udp_source=no_udp)
    assert (route.ifname, route.source, route.gateway) == ("eth0", "172.17.0.4", "172.17.0.1")


def test_own_address_maps_from_lo_to_the_interface_holding_it() -> None:
    nics = nics_from_facts(load("cloud_two_nic"))
    route = route_to("10.0.0.34", nics, run_ip=RecordedIp("cloud_two_nic"), udp_source=no_udp)
    assert (route.ifname, route.source, route.local) == ("eth1", "10.0.0.34", True)


def test_ipv6_peer_uses_ip_dash_6_and_keeps_the_family() -> None:
    nics = nics_from_facts(load("ipv6_only"))
    ip = RecordedIp("ipv6_only")
    route = route_to("[fd00:10::6]:29500", nics, run_ip=ip, udp_source=no_udp)
    assert ip.calls == [["ip", "-j", "-6", "route", "get", "fd00:10::6"]]
    assert (route.family, route.ifname, route.source) == ("ipv6", "eth0", "fd00:10::5")


def test_ipv6_answer_without_prefsrc_takes_the_interfaces_routable_address() -> None:
    nics = nics_from_facts(load("ipv6_only"))
    route = route_to("2001:db8:2::9", nics, run_ip=RecordedIp("ipv6_only"), udp_source=no_udp)
    assert (route.ifname, route.source, route.gateway) == ("eth0", "fd00:10::5", "fe80::1")


def test_zoned_link_local_peer_asks_for_that_interface() -> None:
    calls: list[list[str]] = []

    def ip(argv: Sequence[str]) -> str:
        calls.append(list(argv))
        return '[{"dst":"fe80::2","dev":"eth0","prefsrc":"fd00:10::5"}]'

    route_to("fe80::2%eth0", nics_from_facts(load("ipv6_only")), run_ip=ip, udp_source=no_udp)
    assert calls == [["ip", "-j", "-6", "route", "get", "fe80::2", "oif", "eth0"]]


def test_kernel_says_unreachable_is_no_route_without_fallback() -> None:
    nics = nics_from_facts(load("cloud_two_nic"))
    with pytest.raises(NetworkProblem) as info:
        route_to("192.0.2.77", nics, run_ip=RecordedIp("cloud_two_nic"), udp_source=no_udp)
    assert info.value.error_id == "no-route" and info.value.exit_code == ExitCode.NETWORK
    assert "Network is unreachable" in info.value.message and "192.0.2.77" in info.value.message


@pytest.mark.parametrize("kind", ["unreachable", "blackhole", "prohibit"])
def test_unroutable_route_types_are_no_route(kind: str) -> None:
    answer = json.dumps([{"type": kind, "dst": "10.9.9.9", "dev": "lo"}])
    with pytest.raises(NetworkProblem, match=kind):
        route_to("10.9.9.9", (), run_ip=lambda argv: answer, udp_source=no_udp)


# ---- the UDP fallback --------------------------------------------------------------------------


def test_without_iproute2_the_udp_source_is_mapped_to_its_interface() -> None:
    nics = nics_from_facts(load("cloud_two_nic"))
    seen: list[tuple[str, int | None, str]] = []

    def missing_ip(argv: Sequence[str]) -> str:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", "ip")

    def udp(address: str, port: int | None, zone: str) -> str:
        seen.append((address, port, zone))
        return "10.0.0.34"

    route = route_to("10.0.0.35:29500", nics, run_ip=missing_ip, udp_source=udp)
    assert seen == [("10.0.0.35", 29500, "")]
    assert (route.ifname, route.source, route.method) == ("eth1", "10.0.0.34", "udp-connect")


def test_unreadable_ip_output_falls_back_and_a_failing_fallback_is_no_route() -> None:
    def udp(address: str, port: int | None, zone: str) -> str:
        raise OSError(errno.ENETUNREACH, "Network is unreachable")

    with pytest.raises(NetworkProblem) as info:
        route_to("10.0.0.35", (), run_ip=lambda argv: "garbage", udp_source=udp)
    assert info.value.error_id == "no-route"
    assert "Network is unreachable" in info.value.message and "garbage" in info.value.message


def test_fallback_source_on_no_known_interface_is_no_route() -> None:
    def missing_ip(argv: Sequence[str]) -> str:
        raise FileNotFoundError("ip")

    with pytest.raises(NetworkProblem, match="on no interface"):
        route_to("10.0.0.35", (), run_ip=missing_ip, udp_source=lambda a, p, z: "10.0.0.99")


@pytest.mark.parametrize(("peer", "source"), [("127.0.0.1", "127.0.0.1"), ("::1", "::1")])
def test_real_udp_fallback_on_loopback(peer: str, source: str) -> None:
    if ":" in peer and not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    assert udp_source_address(peer, None) == source

    def missing_ip(argv: Sequence[str]) -> str:
        raise FileNotFoundError("ip")

    route = route_to(peer, discover(), run_ip=missing_ip)
    assert (route.ifname, route.source, route.method) == ("lo", source, "udp-connect")


# ---- the real `ip` on this machine (loopback only) ---------------------------------------------


def test_real_ip_route_get_for_loopback() -> None:
    route = route_to("127.0.0.1")
    assert (route.ifname, route.source, route.local) == ("lo", "127.0.0.1", True)
    assert route.method == "ip-route-get"


def test_real_own_address_is_reported_on_its_interface() -> None:
    nics: list[Nic] = [n for n in discover() if n.kind.value != "loopback" and n.ipv4]
    if not nics:
        pytest.skip("no non-loopback IPv4 address here")
    own = nics[0].ipv4[0].address
    route = route_to(own, discover())
    assert (route.ifname, route.source, route.local) == (nics[0].name, own, True)


def test_run_ip_command_failure_carries_stderr() -> None:
    with pytest.raises(IpCommandError) as info:
        run_ip_command(["ip", "-j", "route", "get", "not-an-address"])
    assert info.value.returncode != 0 and info.value.stderr


def test_own_address_also_bound_on_lo_still_maps_to_the_real_interface() -> None:
    facts = load("cloud_two_nic")
    facts["interfaces"]["a-lo-alias"] = {  # sorts before eth1; a loopback holding the same address
        "type": 772, "flags": ["UP", "LOOPBACK"], "operstate": "unknown",
        "addresses": [{"family": "ipv4", "address": "10.0.0.34", "prefixlen": 32}],
    }  # fmt: skip
    nics = nics_from_facts(facts)
    route = route_to("10.0.0.34", nics, run_ip=RecordedIp("cloud_two_nic"), udp_source=no_udp)
    assert route.ifname == "eth1"


@pytest.mark.parametrize("host", ["300.1.1.1", "10.0.0", "1.2.3.4.5", "::zz", "fd00::2::3", "10.0.0.256"])
def test_a_mistyped_address_is_an_error_without_any_lookup(host: str) -> None:
    from ddpkit.net.route import resolve

    asked: list[str] = []

    def lookup(name: str, *rest: object) -> list[object]:
        asked.append(name)
        return []

    with pytest.raises(ConfigError) as info:
        resolve(host, lookup=lookup)  # type: ignore[arg-type]
    assert info.value.error_id == "bad-address" and asked == []
