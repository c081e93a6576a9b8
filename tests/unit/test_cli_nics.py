"""`ddpkit nics`: the real command on this machine, and on recorded machines (fixtures)."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import ddpkit.cli.commands.nics as nics_command
from ddpkit.errors import ExitCode
from ddpkit.net.interfaces import nics_from_facts
from ddpkit.net.iproute import IpCommandError
from ddpkit.net.route import route_to

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "net"


def use_fixture(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make `ddpkit nics` see a recorded machine: its interfaces and its `ip route get` answers."""
    facts: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    recorded = facts.get("route_get", {})

    def ip(argv: Sequence[str]) -> str:
        address = argv[argv.index("get") + 1]
        if address not in recorded:
            raise IpCommandError(argv, 2, "RTNETLINK answers: Network is unreachable")
        return json.dumps(recorded[address])

    def no_udp(address: str, port: int | None, zone: str) -> str:
        raise AssertionError("no UDP fallback with recorded answers")

    monkeypatch.setattr(nics_command, "discover", lambda: nics_from_facts(facts))
    monkeypatch.setattr(nics_command, "route_to", functools.partial(route_to, run_ip=ip, udp_source=no_udp))


# ---- this machine ---------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2")
def test_json_lists_the_same_interfaces_and_addresses_as_ip_addr(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("nics", "--json")
    assert result.code == 0, result.err
    doc = result.json()
    ip_addr = json.loads(
        subprocess.run(["ip", "-j", "addr"], capture_output=True, text=True, check=True, timeout=30).stdout
    )
    expected = {
        link["ifname"]: sorted((a["local"], a["prefixlen"]) for a in link.get("addr_info", []))
        for link in ip_addr
    }
    got = {
        iface["name"]: sorted((a["address"], a["prefixlen"]) for a in iface["addresses"])
        for iface in doc["interfaces"]
    }
    assert got == expected
    assert [i["name"] for i in doc["interfaces"]] == sorted(expected)
    by_name = {link["ifname"]: link for link in ip_addr}
    for iface in doc["interfaces"]:
        assert iface["mtu"] == by_name[iface["name"]]["mtu"]
        assert iface["up"] == ("UP" in by_name[iface["name"]]["flags"]
                               and by_name[iface["name"]]["operstate"] in ("UP", "UNKNOWN"))  # fmt: skip


def test_json_document_shape(run_cli) -> None:  # type: ignore[no-untyped-def]
    doc = run_cli("nics", "--json").json()
    assert doc["schema"] == "ddpkit.nics/1"
    assert set(doc) >= {"interfaces", "route", "recommendation", "env", "env_lines"}
    assert doc["route"] is None
    name = doc["recommendation"]["interface"]
    assert doc["env"] == {"NCCL_SOCKET_IFNAME": f"={name}", "GLOO_SOCKET_IFNAME": name}
    assert doc["env_lines"] == [f"NCCL_SOCKET_IFNAME=={name}", f"GLOO_SOCKET_IFNAME={name}"]
    for iface in doc["interfaces"]:
        assert {"name", "kind", "up", "mtu", "speed_mbps", "addresses", "traps"} <= set(iface)


def test_human_table_lists_every_interface_and_the_env_lines(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("nics")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].split() == ["NAME", "STATE", "KIND", "ADDRESSES", "MTU", "SPEED", "TRAPS", "/", "NOTES"]
    for iface in run_cli("nics", "--json").json()["interfaces"]:
        assert any(line.startswith(iface["name"] + " ") for line in lines)
    chosen = run_cli("nics", "--json").json()["recommendation"]["interface"]
    assert f"NCCL_SOCKET_IFNAME=={chosen}" in lines and f"GLOO_SOCKET_IFNAME={chosen}" in lines


def test_to_loopback_routes_via_lo_and_warns(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("nics", "--to", "127.0.0.1:29500", "--json")
    assert result.code == 0
    doc = result.json()
    assert doc["route"]["ifname"] == "lo" and doc["route"]["source"] == "127.0.0.1"
    assert doc["recommendation"]["interface"] == "lo"
    assert [t["id"] for t in doc["recommendation"]["traps"]] == ["loopback"]
    assert "warning: the route to 127.0.0.1 uses lo" in result.err


def test_export_prints_only_shell_lines_that_a_shell_accepts() -> None:
    proc = subprocess.run(
        ["sh", "-c", f'eval "$({sys.executable} -m ddpkit nics --export)";'
         ' printf "%s|%s" "$NCCL_SOCKET_IFNAME" "$GLOO_SOCKET_IFNAME"'],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    nccl, gloo = proc.stdout.split("|")
    assert nccl == f"={gloo}" and gloo


def test_export_and_json_together_is_a_usage_error(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("nics", "--export", "--json")
    assert result.code == ExitCode.USAGE and "bad-usage" in result.out + result.err


@pytest.mark.parametrize(("spec", "error_id"), [("10.0.0.3:99999", "bad-host"), ("[fd00::1", "bad-host")])
def test_bad_to_is_a_config_error(run_cli, spec: str, error_id: str) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("nics", "--to", spec)
    assert result.code == ExitCode.CONFIG
    assert f"error [{error_id}]" in result.err and "fix:" in result.err


def test_nics_does_not_import_torch_or_rich() -> None:
    code = (
        "import sys, io\n"
        "from ddpkit.cli.output.console import Console\n"
        "from ddpkit.cli.main import main\n"
        "rc = main(['nics', '--json'], Console(out=io.StringIO(), err=io.StringIO(), color=False))\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'rich', 'numpy'))\n"
        "print(rc, bad)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "0 []", proc.stderr


# ---- recorded machines ----------------------------------------------------------------------------


def test_cloud_instance_recommends_eth1(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    use_fixture(monkeypatch, "cloud_two_nic")
    result = run_cli("nics")
    assert result.code == 0
    lines = result.out.splitlines()
    assert "NCCL_SOCKET_IFNAME==eth1" in lines and "GLOO_SOCKET_IFNAME=eth1" in lines
    eth0_row = next(line for line in lines if line.startswith("eth0 "))
    assert "172.17.0.4/16" in eth0_row and "docker-default-subnet" in eth0_row and "veth" in eth0_row
    assert result.err == ""


def test_cloud_instance_to_master_on_private_network(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    use_fixture(monkeypatch, "cloud_two_nic")
    doc = run_cli("nics", "--to", "10.0.0.35:29500", "--json").json()
    assert doc["route"] == {
        "host": "10.0.0.35", "address": "10.0.0.35", "family": "ipv4", "ifname": "eth1",
        "source": "10.0.0.34", "gateway": None, "local": False, "method": "ip-route-get",
    }  # fmt: skip
    assert doc["recommendation"]["interface"] == "eth1"
    assert doc["env_lines"] == ["NCCL_SOCKET_IFNAME==eth1", "GLOO_SOCKET_IFNAME=eth1"]


def test_route_through_a_trap_warns_and_export_still_works(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    use_fixture(monkeypatch, "cloud_two_nic")
    result = run_cli("nics", "--to", "8.8.8.8", "--export")
    assert result.code == 0
    assert result.out.splitlines() == ["export NCCL_SOCKET_IFNAME==eth0", "export GLOO_SOCKET_IFNAME=eth0"]
    assert "warning: the route to 8.8.8.8 uses eth0" in result.err and "docker-default-subnet" in result.err


def test_no_route_is_a_network_error(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    use_fixture(monkeypatch, "cloud_two_nic")
    result = run_cli("nics", "--to", "192.0.2.50", "--json")
    assert result.code == ExitCode.NETWORK
    assert result.json()["error"]["id"] == "no-route"


def test_no_usable_interface_still_lists_interfaces(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    use_fixture(monkeypatch, "link_local_only")
    human = run_cli("nics")
    assert human.code == ExitCode.CONFIG
    assert "eth0" in human.out and "link-local-only" in human.out
    assert "error [no-usable-interface]" in human.err and "NCCL_SOCKET_IFNAME" not in human.out
    doc = run_cli("nics", "--json").json()
    assert doc["schema"] == "ddpkit.nics/1" and doc["recommendation"] is None and doc["env"] == {}
    assert doc["error"]["id"] == "no-usable-interface"
    assert run_cli("nics", "--export").out == ""


def test_ipv6_only_machine(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    use_fixture(monkeypatch, "ipv6_only")
    result = run_cli("nics", "--to", "[fd00:10::6]:29500", "--json")
    doc = result.json()
    assert doc["route"]["family"] == "ipv6" and doc["route"]["source"] == "fd00:10::5"
    assert doc["recommendation"]["interface"] == "eth0"
    assert "no-ipv4" in result.err


def test_ib_machine_table_shows_kinds_speed_and_rdma(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    use_fixture(monkeypatch, "ib_eth")
    result = run_cli("nics")
    rows = {line.split()[0]: line for line in result.out.splitlines() if line and not line.startswith(" ")}
    assert "infiniband" in rows["ib0"] and "200 Gb/s" in rows["ib0"] and "rdma" in rows["ib0"]
    assert "down" in rows["ib1"] and "interface-down" in rows["ib1"]
    assert "25 Gb/s" in rows["eth0"]
    assert "NCCL_SOCKET_IFNAME==ib0" in result.out.splitlines()


def test_docker_host_table_tells_no_carrier_from_down(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    use_fixture(monkeypatch, "docker_veth_noise")
    monkeypatch.setenv("COLUMNS", "160")  # one line per interface (at 100 the notes wrap)
    result = run_cli("nics")
    rows = {line.split()[0]: line.split() for line in result.out.splitlines() if line and line[0] != " "}
    assert rows["br-5e1c0a7d9f21"][1:3] == ["no-carrier", "container-bridge"]
    assert rows["docker0"][1:3] == ["up", "container-bridge"]
    assert rows["veth3f2a1b9"][-2:] == ["in", "docker0"]
    assert "NCCL_SOCKET_IFNAME==eth0" in result.out.splitlines()
