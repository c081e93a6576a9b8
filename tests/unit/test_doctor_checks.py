"""Local preflight checks of `ddpkit doctor`: pure rows from facts, the fact collector on a fake
/proc+/sys tree with fake probes, and the network rows on recorded interface fixtures."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ddpkit.doctor.checks import local
from ddpkit.doctor.checks.facts import (
    IbDevice,
    LocalFacts,
    Probes,
    ShmFacts,
    _bind_free,
    _torch,
    collect_local_facts,
)
from ddpkit.doctor.checks.model import CheckRow, worst
from ddpkit.doctor.checks.network import network_checks
from ddpkit.errors import NetworkProblem
from ddpkit.net.interfaces import Nic, nics_from_facts
from ddpkit.net.route import Route

GIB, MIB = 1 << 30, 1 << 20
HEALTHY = LocalFacts(
    hostname="node1", hostname_addresses=("10.0.0.2",), shm=ShmFacts(True, 16 * GIB, 16 * GIB, True),
    nofile=(65536, 65536), memlock=(-1, -1), port_range=(32768, 60999),
    gpus=("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)", "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)"),
    torch_version="2.4.0+cu121", torch_cuda="12.1", master_port=29500, master_port_free=True,
)
NET = Path(__file__).resolve().parents[1] / "fixtures" / "net"


def row(rows: tuple[CheckRow, ...], row_id: str) -> CheckRow:
    return next(r for r in rows if r.id == row_id)


def test_a_healthy_node_passes_every_local_check() -> None:
    rows = local.local_rows(HEALTHY, {})
    assert [r.status for r in rows] == ["pass"] * len(rows)
    assert worst(rows) == "pass"
    assert row(rows, "gpus").detail == "2 x NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize("address", ["127.0.1.1", "127.0.0.1", "172.17.0.4"])
def test_hostname_trap_for_gloo(address: str) -> None:
    result = local.hostname_row(replace(HEALTHY, hostname_addresses=(address,)), {}, "eth1")
    assert result.status == "warn"
    assert "Gloo" in result.detail and "export GLOO_SOCKET_IFNAME=eth1" in result.fix


def test_hostname_trap_is_harmless_with_gloo_socket_ifname() -> None:
    facts = replace(HEALTHY, hostname_addresses=("127.0.1.1",))
    assert local.hostname_row(facts, {"GLOO_SOCKET_IFNAME": "eth1"}).status == "pass"


def test_unresolvable_hostname() -> None:
    facts = replace(HEALTHY, hostname_addresses=(), hostname_error="Name or service not known")
    result = local.hostname_row(facts, {})
    assert result.status == "warn" and "/etc/hosts" in result.fix


@pytest.mark.parametrize(("shm", "status"), [
    (ShmFacts(True, 64 * MIB, 60 * MIB, True), "fail"),
    (ShmFacts(True, 512 * MIB, 500 * MIB, True), "warn"),
    (ShmFacts(True, 8 * GIB, 8 * GIB, False), "fail"),
    (ShmFacts(False), "warn"),
    (ShmFacts(True, 8 * GIB, 1 * GIB, True), "pass"),
])
def test_shm_sizes(shm: ShmFacts, status: str) -> None:
    result = local.shm_row(replace(HEALTHY, shm=shm))
    assert result.status == status
    assert (result.fix == "") == (status == "pass")
    if status != "pass":  # a container renter's fixes first, the host's last (issue 35)
        assert result.fix.startswith("export NCCL_SHM_DISABLE=1")
        assert result.fix.index("DataLoader") < result.fix.index("--shm-size")


def test_open_file_limit() -> None:
    low = local.nofile_row(replace(HEALTHY, nofile=(1024, 1048576)))
    assert low.status == "warn" and low.fix.startswith("ulimit -n 65536")
    capped = local.nofile_row(replace(HEALTHY, nofile=(1024, 4096)))
    assert "limits.conf" in capped.fix
    assert local.nofile_row(replace(HEALTHY, nofile=(-1, -1))).status == "pass"


def test_master_port_inside_the_ephemeral_range() -> None:
    facts = replace(HEALTHY, port_range=(20000, 60999))
    result = local.ephemeral_ports_row(facts)
    assert result.status == "warn" and "ip_local_reserved_ports=29500" in result.fix
    reserved = replace(facts, reserved_ports="29400,29500")
    assert local.ephemeral_ports_row(reserved).status == "pass"
    few = local.ephemeral_ports_row(replace(HEALTHY, port_range=(60000, 60999)))
    assert few.status == "warn" and "1000 ports" in few.detail


def test_master_port_in_use() -> None:
    result = local.master_port_row(replace(HEALTHY, master_port_free=False))
    assert result.status == "warn" and "sport = :29500" in result.fix


def test_infiniband_rows() -> None:
    active = (IbDevice("mlx5_0", ("1: 4: ACTIVE",)),)
    assert local.infiniband_row(HEALTHY, {}).status == "pass"
    assert local.infiniband_row(replace(HEALTHY, ib_devices=active), {}).status == "pass"
    disabled = local.infiniband_row(replace(HEALTHY, ib_devices=active), {"NCCL_IB_DISABLE": "1"})
    assert disabled.status == "warn"
    down = (IbDevice("mlx5_0", ("1: 1: DOWN",)),)
    assert local.infiniband_row(replace(HEALTHY, ib_devices=down), {}).status == "warn"
    memlock = local.infiniband_row(replace(HEALTHY, ib_devices=active, memlock=(65536, 65536)), {})
    assert memlock.status == "warn" and "ulimit -l unlimited" in memlock.fix


def test_gpu_rows() -> None:
    assert local.gpus_row(replace(HEALTHY, gpus=None), {}).status == "warn"
    broken = local.gpus_row(replace(HEALTHY, gpus=(), gpu_error="NVIDIA-SMI has failed"), {})
    assert broken.status == "fail" and "NVIDIA-SMI has failed" in broken.detail
    visible = local.gpus_row(HEALTHY, {"CUDA_VISIBLE_DEVICES": "0"})
    assert "CUDA_VISIBLE_DEVICES=0" in visible.detail


def test_torch_rows() -> None:
    assert local.torch_row(replace(HEALTHY, torch_version=None)).status == "fail"
    cpu_on_gpu = local.torch_row(replace(HEALTHY, torch_cuda=None))
    assert cpu_on_gpu.status == "warn" and "CPU build" in cpu_on_gpu.detail
    cpu_only = local.torch_row(replace(HEALTHY, torch_cuda=None, gpus=None))
    assert cpu_only.status == "pass"


def test_collect_reads_a_fake_tree_and_probes(tmp_path: Path) -> None:
    (tmp_path / "proc/sys/net/ipv4").mkdir(parents=True)
    (tmp_path / "proc/sys/net/ipv4/ip_local_port_range").write_text("20000\t60999\n")
    (tmp_path / "proc/sys/net/ipv4/ip_local_reserved_ports").write_text("29500\n")
    port = tmp_path / "sys/class/infiniband/mlx5_0/ports/1"
    port.mkdir(parents=True)
    (port / "state").write_text("4: ACTIVE\n")
    (tmp_path / "dev/shm").mkdir(parents=True)
    probes = Probes(
        hostname=lambda: "node7",
        resolve=lambda name: ("127.0.1.1",),
        bind_free=lambda p: p != 29500,
        nvidia_smi=lambda: (("GPU 0: NVIDIA A10G (UUID: GPU-x)",), ""),
        torch=lambda: ("2.4.0+cu121", "12.1"),
        rlimit=lambda which: (1024, 4096),
    )
    facts = collect_local_facts(29500, probes=probes, root=tmp_path)
    assert facts.hostname == "node7" and facts.hostname_addresses == ("127.0.1.1",)
    assert facts.port_range == (20000, 60999) and facts.reserved_ports == "29500"
    assert facts.ib_devices == (IbDevice("mlx5_0", ("1: 4: ACTIVE",)),)
    assert facts.shm.exists and facts.shm.total > 0
    assert facts.master_port_free is False and facts.nofile == (1024, 4096)
    rows = local.local_rows(facts, {})
    assert row(rows, "hostname").status == "warn"
    assert row(rows, "ephemeral-ports").status == "pass"  # reserved, so not a trap
    assert row(rows, "infiniband").status == "warn"  # memlock 1024 bytes


def test_resolver_errors_become_a_row() -> None:
    def fail(name: str) -> tuple[str, ...]:
        raise socket.gaierror(-2, "Name or service not known")

    probes = Probes(hostname=lambda: "ghost", resolve=fail, bind_free=lambda p: True,
                    nvidia_smi=lambda: (None, ""), torch=lambda: (None, None))
    facts = collect_local_facts(probes=probes)
    assert "Name or service not known" in local.hostname_row(facts, {}).detail


def test_bind_probe_sees_a_loopback_listener() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        assert _bind_free(sock.getsockname()[1]) is False


def test_torch_probe_matches_metadata_without_importing_torch() -> None:
    probe = ("import sys, json\nfrom ddpkit.doctor.checks.facts import _torch\n"
             "v, cuda = _torch()\nassert 'torch' not in sys.modules\nprint(json.dumps([v, cuda]))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    version, cuda = json.loads(out)
    import importlib.metadata

    assert version == importlib.metadata.version("torch") == _torch()[0]
    assert (cuda is None) == ("+cpu" in version)


def nics(name: str) -> tuple[Nic, ...]:
    facts: dict[str, Any] = json.loads((NET / f"{name}.json").read_text())
    return nics_from_facts(facts)


def test_network_rows_on_the_cloud_two_nic_fixture(tmp_path: Path) -> None:
    checks = network_checks({}, nics=nics("cloud_two_nic"), home=tmp_path)
    assert checks.interface == "eth1"
    assert row(checks.rows, "interface").status == "pass"
    settings = row(checks.rows, "nccl-settings")
    assert settings.status == "warn" and settings.fix == "ddpkit nccl-conf set NCCL_SOCKET_IFNAME==eth1"


def test_network_rows_show_provenance_of_a_set_ifname(tmp_path: Path) -> None:
    (tmp_path / ".nccl.conf").write_text("NCCL_SOCKET_IFNAME==eth1\n")
    checks = network_checks({}, nics=nics("cloud_two_nic"), home=tmp_path)
    settings = row(checks.rows, "nccl-settings")
    assert settings.status == "pass"
    assert f"{tmp_path / '.nccl.conf'}:1" in settings.detail


def test_route_to_the_master_through_a_trap(tmp_path: Path) -> None:
    def via_eth0(host: str, found: Any) -> Route:
        return Route(host, host, "ipv4", "eth0", "172.17.0.4", "172.17.0.1")

    checks = network_checks({}, "10.0.0.9", nics=nics("cloud_two_nic"), home=tmp_path,
                            lookup_route=via_eth0)
    assert row(checks.rows, "route").status == "pass"
    assert row(checks.rows, "interface").status in ("warn", "fail")
    assert "172.17.0.4" in row(checks.rows, "interface").detail


def test_no_route_to_the_master_fails(tmp_path: Path) -> None:
    def no_route(host: str, found: Any) -> Route:
        raise NetworkProblem("no-route", f"no route to {host}", "check the address")

    checks = network_checks({}, "10.9.9.9", nics=nics("cloud_two_nic"), home=tmp_path,
                            lookup_route=no_route)
    route = row(checks.rows, "route")
    assert route.status == "fail" and route.detail == "no route to 10.9.9.9"


def test_documented_preflight_ids_are_the_rows(tmp_path: Path) -> None:
    from ddpkit.doctor.catalogue import PREFLIGHT

    def route(host: str, found: Any) -> Route:
        return Route(host, host, "ipv4", "eth1", "10.0.0.34")

    network = network_checks({}, "10.0.0.35", nics=nics("cloud_two_nic"), home=tmp_path,
                             lookup_route=route)
    produced = [r.id for r in network.rows + local.local_rows(HEALTHY, {})]
    assert sorted(produced) == sorted(check_id for check_id, _ in PREFLIGHT)


def _fake_tool(directory: Path, script: str) -> None:
    tool = directory / "nvidia-smi"
    tool.write_text("#!/bin/sh\n" + script)
    tool.chmod(0o755)


def test_nvidia_smi_listing_is_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ddpkit.doctor.checks.facts import _nvidia_smi

    _fake_tool(tmp_path, '[ "$1" = "-L" ] || exit 2\n'
               'echo "GPU 0: NVIDIA H200 (UUID: GPU-aaaa)"\necho "GPU 1: NVIDIA H200 (UUID: GPU-b)"\n')
    monkeypatch.setenv("PATH", str(tmp_path))
    gpus, error = _nvidia_smi()
    assert error == "" and gpus == ("GPU 0: NVIDIA H200 (UUID: GPU-aaaa)",
                                    "GPU 1: NVIDIA H200 (UUID: GPU-b)")
    assert local.gpus_row(replace(HEALTHY, gpus=gpus), {}).detail == "2 x NVIDIA H200"


def test_nvidia_smi_failure_is_a_fail_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ddpkit.doctor.checks.facts import _nvidia_smi

    _fake_tool(tmp_path, "echo \"NVIDIA-SMI has failed because it couldn't communicate with the "
               "NVIDIA driver.\" >&2\nexit 9\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    gpus, error = _nvidia_smi()
    assert gpus == () and error.startswith("NVIDIA-SMI has failed")
    result = local.gpus_row(replace(HEALTHY, gpus=gpus, gpu_error=error), {})
    assert result.status == "fail"


def test_no_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ddpkit.doctor.checks.facts import _nvidia_smi

    monkeypatch.setenv("PATH", str(tmp_path))
    assert _nvidia_smi() == (None, "")
