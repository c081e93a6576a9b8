from __future__ import annotations

import pytest

from ddpkit.errors import ConfigError, UsageError
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.node.plan import NodeFacts, plan_node
from ddpkit.net.interfaces import Address, Nic, NicKind
from ddpkit.net.route import Route


def _nic(name: str, kind: NicKind, *addrs: tuple[str, int]) -> Nic:
    return Nic(name=name, kind=kind, up=True, mtu=1500, speed_mbps=None,
               addresses=tuple(Address("ipv4", a, p) for a, p in addrs))


NICS = (
    _nic("eth0", NicKind.VETH, ("172.17.0.4", 16)),
    _nic("eth1", NicKind.VETH, ("10.0.0.3", 24)),
    _nic("lo", NicKind.LOOPBACK, ("127.0.0.1", 8)),
)
ROUTE = Route(host="10.0.0.2", address="10.0.0.2", family="ipv4", ifname="eth1", source="10.0.0.3")


def _config(**kw: object) -> LaunchConfig:
    base: dict[str, object] = dict(nnodes=2, node_rank=1, master_addr="10.0.0.2", entry="train.py")
    base.update(kw)
    return LaunchConfig(**base)  # type: ignore[arg-type]


def _facts(nics: tuple[Nic, ...] = NICS, route: Route | None = ROUTE,
           masters: tuple[str, ...] = ("10.0.0.2",), **kw: object) -> NodeFacts:
    return NodeFacts(hostname="node1", nics=nics, master_addresses=masters, route=route,
                     **kw)  # type: ignore[arg-type]


def _plan(config: LaunchConfig, facts: NodeFacts, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return plan_node(config, facts, env or {"PATH": "/usr/bin"}, python="py", run_dir="/runs/x")


def test_worker_takes_the_interface_of_its_route_to_the_master() -> None:
    plan = _plan(_config(), _facts())
    assert plan.interface.ifname == "eth1"
    assert plan.interface.source == "route"
    assert plan.env_set["NCCL_SOCKET_IFNAME"] == "=eth1"  # exact match: eth1, not eth10
    assert plan.env_set["GLOO_SOCKET_IFNAME"] == "eth1"
    assert plan.env["PATH"] == "/usr/bin"  # the rest of the env is passed on
    assert "--local-addr=10.0.0.3" in plan.argv


def test_master_takes_the_interface_holding_the_master_address() -> None:
    nics = (_nic("eth0", NicKind.VETH, ("172.17.0.4", 16)),
            _nic("ens5", NicKind.PHYSICAL, ("10.0.0.2", 24)))
    plan = _plan(_config(node_rank=0), _facts(nics=nics, route=None))
    assert plan.interface.ifname == "ens5"
    assert plan.interface.source == "master-address"
    assert plan.env_set["GLOO_SOCKET_IFNAME"] == "ens5"
    assert len(plan.peer_commands) == 1
    assert "--node-rank 1" in plan.peer_commands[0]
    assert "--master-addr 10.0.0.2" in plan.peer_commands[0]


def test_master_address_not_on_the_master_is_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        _plan(_config(node_rank=0, master_addr="10.0.0.9"), _facts(masters=("10.0.0.9",)))
    assert info.value.error_id == "master-not-local"


def test_master_not_local_suggests_this_machines_reachable_addresses() -> None:
    with pytest.raises(ConfigError) as info:
        _plan(_config(node_rank=0, master_addr="10.0.0.9"), _facts(masters=("10.0.0.9",)))
    fix = info.value.hint
    assert "--master-addr 10.0.0.3 (eth1)" in fix
    assert "10.0.0.9" not in fix and "172.17" not in fix  # neither the rejected nor the NAT one
    assert info.value.details["private_addresses"] == ["10.0.0.3"]


def test_a_master_given_its_shared_nat_address_stops_like_its_workers() -> None:
    """The guide's trap from node 0: 172.17.0.4 is on its eth0 too, and every worker's."""
    with pytest.raises(ConfigError) as info:
        _plan(_config(node_rank=0, master_addr="172.17.0.4"), _facts(masters=("172.17.0.4",)))
    assert info.value.error_id == "master-address-shared"
    assert "eth0" in info.value.message and "--master-addr 10.0.0.3 (eth1)" in info.value.hint
    worker = pytest.raises(ConfigError)
    with worker as seen:  # a worker given it: the same id
        _plan(_config(master_addr="172.17.0.4"), _facts(masters=("172.17.0.4",)))
    assert seen.value.error_id == "master-address-shared"


def test_a_docker_subnet_address_on_a_physical_nic_is_a_real_network() -> None:
    nics = (_nic("ens5", NicKind.PHYSICAL, ("172.17.0.4", 16)),)
    plan = _plan(_config(node_rank=0, master_addr="172.17.0.4"),
                 _facts(nics=nics, route=None, masters=("172.17.0.4",)))
    assert plan.interface.ifname == "ens5"


def test_a_master_reached_through_a_gateway_is_said_to_be_on_no_network_of_this_machine() -> None:
    via = Route(host="10.9.0.2", address="10.9.0.2", family="ipv4", ifname="eth1",
                source="10.0.0.3", gateway="10.0.0.1")
    plan = _plan(_config(master_addr="10.9.0.2"), _facts(route=via, masters=("10.9.0.2",)))
    assert plan.interface.ifname == "eth1"
    assert "on none of this machine's networks" in plan.interface.reason
    assert "gateway 10.0.0.1 on eth1" in plan.interface.reason


def test_ifname_flag_wins_and_is_validated() -> None:
    plan = _plan(_config(ifname="eth0"), _facts(), env={"NCCL_SOCKET_IFNAME": "eth1"})
    assert plan.interface.source == "flag"
    assert plan.env_set["NCCL_SOCKET_IFNAME"] == "=eth0"
    assert any("172.17" in w or "docker" in w for w in plan.warnings)
    with pytest.raises(ConfigError) as info:
        _plan(_config(ifname="nosuch"), _facts())
    assert info.value.error_id == "interface-not-found"


def test_explicit_user_env_wins_with_a_warning_when_wrong() -> None:
    plan = _plan(_config(), _facts(), env={"NCCL_SOCKET_IFNAME": "eth0"})
    assert "NCCL_SOCKET_IFNAME" not in plan.env_set
    assert plan.env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert any("NCCL_SOCKET_IFNAME=eth0" in w and "eth1" in w for w in plan.warnings)
    # GLOO was not set by the user: ddpkit still sets it
    assert plan.env_set["GLOO_SOCKET_IFNAME"] == "eth1"


def test_user_env_matching_nothing_is_warned() -> None:
    plan = _plan(_config(), _facts(), env={"GLOO_SOCKET_IFNAME": "ens9"})
    assert any("matches no interface" in w for w in plan.warnings)


def test_nccl_conf_file_setting_is_respected() -> None:
    facts = _facts(nccl_file_settings={"NCCL_SOCKET_IFNAME": ("=eth1", "/etc/nccl.conf")})
    plan = _plan(_config(), facts)
    assert "NCCL_SOCKET_IFNAME" not in plan.env_set
    assert plan.warnings == ()


def test_debug_sets_nccl_and_torch_debugging() -> None:
    plan = _plan(_config(debug=True), _facts())
    assert plan.env_set["NCCL_DEBUG"] == "INFO"
    assert plan.env_set["NCCL_DEBUG_SUBSYS"] == "INIT,BOOTSTRAP,NET"
    assert plan.env_set["TORCH_DISTRIBUTED_DEBUG"] == "DETAIL"


def test_single_node_needs_no_interface() -> None:
    plan = _plan(_config(nnodes=1, node_rank=0, master_addr="127.0.0.1", hang_timeout=0.0),
                 _facts(route=None))
    assert plan.interface.source == "loopback"
    assert plan.env_set == {}  # (no hang timeout: no flight recorder either)


def test_a_hang_timeout_gives_the_workers_a_flight_recorder_unless_they_have_one() -> None:
    plan = _plan(_config(nnodes=1, node_rank=0, master_addr="127.0.0.1", hang_timeout=300.0),
                 _facts(route=None))
    assert plan.env_set["TORCH_FR_BUFFER_SIZE"] == plan.env["TORCH_FR_BUFFER_SIZE"] == "2000"
    assert plan.env_set["TORCH_FR_DUMP_TEMP_FILE"].endswith("/flight-recorder/rank_")
    assert plan.env_set["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in plan.env_set  # deprecated since 2.8: it warns
    old = _plan(_config(nnodes=1, node_rank=0, master_addr="127.0.0.1"),
                _facts(route=None, torch_version="2.5.1"))
    assert old.env_set["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000"
    assert "TORCH_FR_BUFFER_SIZE" not in old.env_set
    mine = _plan(_config(nnodes=1, node_rank=0, master_addr="127.0.0.1"), _facts(route=None),
                 env={"TORCH_FR_BUFFER_SIZE": "50"})
    assert "TORCH_FR_BUFFER_SIZE" not in mine.env_set and mine.env["TORCH_FR_BUFFER_SIZE"] == "50"


def test_plan_is_serialisable() -> None:
    import json

    doc = _plan(_config(), _facts()).to_dict()
    assert json.loads(json.dumps(doc))["interface"]["name"] == "eth1"


@pytest.mark.parametrize("kw, error_id", [
    ({"node_rank": 2}, "node-rank-out-of-range"),
    ({"master_port": 70000}, "bad-port"),
    ({"nproc_per_node": "two"}, "bad-nproc-per-node"),
    ({"nnodes": 0, "node_rank": 0}, "bad-nnodes"),
])
def test_config_validation(kw: dict[str, object], error_id: str) -> None:
    with pytest.raises(UsageError) as info:
        _config(**kw)
    assert info.value.error_id == error_id


def test_peer_commands_repeat_the_env_overrides() -> None:
    nics = (_nic("eth1", NicKind.VETH, ("10.0.0.2", 24)),)
    plan = _plan(_config(node_rank=0, extra_env=(("OMP_NUM_THREADS", "1"),)),
                 _facts(nics=nics, route=None))
    assert "--env OMP_NUM_THREADS=1" in plan.peer_commands[0]
    assert plan.env_set["OMP_NUM_THREADS"] == "1"


def test_peer_commands_mask_secret_looking_env_values() -> None:
    """Issue 22: the printed peer command, --dry-run and the JSON plan never show a secret."""
    import json

    nics = (_nic("eth1", NicKind.VETH, ("10.0.0.2", 24)),)
    secret = "hf_Sup3rS3cretApiKeyValue"
    plan = _plan(_config(node_rank=0, extra_env=(("HF_TOKEN", secret), ("OMP_NUM_THREADS", "1"))),
                 _facts(nics=nics, route=None))
    assert "--env 'HF_TOKEN=<hidden>'" in plan.peer_commands[0]
    assert "--env OMP_NUM_THREADS=1" in plan.peer_commands[0]
    assert secret not in json.dumps(plan.to_dict())
    assert plan.env_set["HF_TOKEN"] == secret  # this node's own ranks still get the value
