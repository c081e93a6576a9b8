"""Pure parts of ddpkit.sim: spec validation and parsing, names, addresses, the ordered steps."""

from __future__ import annotations

import ipaddress
import re

import pytest

from ddpkit.errors import ConfigError, EnvironmentProblem
from ddpkit.sim import SimSpec, build_cluster, node_argv, parse_ifname_style, plan_up
from ddpkit.sim.host import find_tools
from ddpkit.sim.shaping import tbf_burst_bytes
from ddpkit.sim.spec import MAX_NODES, format_rate, parse_delay, parse_loss, parse_rate
from ddpkit.sim.topology import (
    IFNAME_MAX,
    hosts_file_text,
    owned_link_pattern,
    owned_namespace_pattern,
    tools_for_up,
)

# -- names ---------------------------------------------------------------------------------------


def _created_links(spec: SimSpec) -> list[str]:
    """Every interface name `ip link add` creates in the plan (both ends of each veth)."""
    names = []
    for step in plan_up(spec):
        argv = step.argv
        if argv[:3] == ("ip", "link", "add"):
            names.append(argv[3])
            if "peer" in argv:
                names.append(argv[argv.index("peer") + 2])
    return names


def _created_namespaces(spec: SimSpec) -> list[str]:
    return [s.argv[3] for s in plan_up(spec) if s.argv[:3] == ("ip", "netns", "add")]


def test_every_interface_name_fits_linux_limit_at_the_longest_cluster_name_and_index() -> None:
    spec = SimSpec(nodes=MAX_NODES, name="abcdef", subnet="10.0.0.0/24",
                   ifnames={MAX_NODES - 1: "a" * 15})
    names = _created_links(spec)
    assert len(names) == 1 + 4 * MAX_NODES  # bridge + two veths (two ends each) per node
    assert max(len(name) for name in names) <= IFNAME_MAX
    assert "abcdefh63a" in names and "abcdefh63b" in names and "abcdef-br" in names


def test_everything_the_plan_creates_is_found_again_by_the_owned_name_patterns() -> None:
    spec = SimSpec(nodes=3, name="dks01", subnet="10.77.1.0/24", ifnames={1: "ens5"})
    cluster = build_cluster(spec)
    host_links = [cluster.bridge] + [n.host_private_peer for n in cluster.nodes]
    assert all(owned_link_pattern("dks01").fullmatch(link) for link in host_links)
    assert all(owned_namespace_pattern("dks01").fullmatch(ns) for ns in _created_namespaces(spec))
    # ...and nothing of a similarly named cluster
    other = build_cluster(SimSpec(nodes=3, name="dks011", subnet="10.77.2.0/24"))
    other_links = [other.bridge] + [n.host_private_peer for n in other.nodes]
    assert not any(owned_link_pattern("dks01").fullmatch(link) for link in other_links)
    assert not any(owned_namespace_pattern("dks01").fullmatch(n.namespace) for n in other.nodes)


def test_host_side_links_are_the_only_links_created_in_the_host_namespace() -> None:
    spec = SimSpec(nodes=2, name="dks02", subnet="10.77.2.0/24")
    for step in plan_up(spec):
        if step.argv[:3] == ("ip", "link", "add") and "peer" in step.argv:
            # the peer inside the node is created directly there: never an `eth0` on the host
            peer_tail = step.argv[step.argv.index("peer"):]
            assert peer_tail[2] in ("eth0", "eth1") and peer_tail[3] == "netns"


@pytest.mark.parametrize("name", ["", "Abc", "1abc", "abcdefg", "ab-c", "ab_c", "ab c"])
def test_bad_cluster_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigError) as info:
        SimSpec(nodes=2, name=name)
    assert info.value.error_id == "sim-bad-name"


# -- addresses -----------------------------------------------------------------------------------


def test_addresses_host_is_dot_one_node_i_is_two_plus_i_and_eth0_is_the_same_everywhere() -> None:
    cluster = build_cluster(SimSpec(nodes=3, name="dks03", subnet="10.77.3.0/24"))
    assert cluster.host_address == "10.77.3.1"
    assert [n.private_address for n in cluster.nodes] == ["10.77.3.2", "10.77.3.3", "10.77.3.4"]
    assert {n.public_address for n in cluster.nodes} == {"172.17.0.4"}
    assert [n.hostname for n in cluster.nodes] == ["node0", "node1", "node2"]
    assert [n.private_ifname for n in cluster.nodes] == ["eth1", "eth1", "eth1"]


def test_default_spec_is_the_issue_layout() -> None:
    cluster = build_cluster(SimSpec(nodes=2))
    assert cluster.name == "ddpkit"
    assert cluster.host_address == "10.0.0.1"
    assert [n.private_address for n in cluster.nodes] == ["10.0.0.2", "10.0.0.3"]
    assert [n.namespace for n in cluster.nodes] == ["ddpkit-n0", "ddpkit-n1"]


def test_subnet_capacity_counts_network_host_and_broadcast() -> None:
    SimSpec(nodes=13, subnet="10.9.0.0/28")  # 16 addresses - network, host, broadcast
    with pytest.raises(ConfigError) as info:
        SimSpec(nodes=14, subnet="10.9.0.0/28")
    assert info.value.error_id == "sim-subnet-too-small"


@pytest.mark.parametrize(
    "subnet", ["10.0.0.1/24", "8.8.8.0/24", "172.17.5.0/24", "127.0.0.0/8", "169.254.0.0/16",
               "fd00::/64", "nonsense", "10.0.0.0/33"],
)
def test_bad_subnets_are_refused(subnet: str) -> None:
    with pytest.raises(ConfigError) as info:
        SimSpec(nodes=2, subnet=subnet)
    assert info.value.error_id == "sim-bad-subnet"


@pytest.mark.parametrize("nodes", [0, -1, MAX_NODES + 1])
def test_node_count_bounds(nodes: int) -> None:
    with pytest.raises(ConfigError) as info:
        SimSpec(nodes=nodes)
    assert info.value.error_id == "sim-bad-node-count"


# -- the steps -----------------------------------------------------------------------------------


def test_every_namespace_and_link_exists_before_a_step_uses_it() -> None:
    spec = SimSpec(nodes=3, name="dks04", subnet="10.77.4.0/24", rate="1gbit", ifnames={2: "ens5"})
    namespaces: set[str] = set()
    links: set[str] = set()
    for step in plan_up(spec):
        argv = list(step.argv)
        if argv[:3] == ["ip", "netns", "add"]:
            namespaces.add(argv[3])
            continue
        for flag in ("-n", "netns"):
            for i, word in enumerate(argv[:-1]):
                if word == flag:
                    assert argv[i + 1] in namespaces, (step.summary, argv)
        if argv[:3] == ["ip", "link", "add"]:
            links.add(argv[3])
            continue
        if "dev" in argv and "-n" not in argv:  # a host-side device
            assert argv[argv.index("dev") + 1] in links, (step.summary, argv)
        if "master" in argv:
            assert argv[argv.index("master") + 1] in links


def test_each_node_gets_its_addresses_hosts_file_and_hostname_in_order() -> None:
    spec = SimSpec(nodes=2, name="dks05", subnet="10.77.5.0/24", ifnames={1: "ens5"})
    steps = plan_up(spec)
    shells = [s.shell() for s in steps]
    assert "ip -n dks05-n0 addr add 172.17.0.4/16 dev eth0" in shells
    assert "ip -n dks05-n1 addr add 172.17.0.4/16 dev eth0" in shells
    assert "ip -n dks05-n0 addr add 10.77.5.2/24 dev eth1" in shells
    assert "ip -n dks05-n1 addr add 10.77.5.3/24 dev ens5" in shells
    assert "ip addr add 10.77.5.1/24 dev dks05-br" in shells
    assert "ip link set dks05h1b master dks05-br" in shells
    # the eth0 far end goes to the dead-end namespace, never onto the bridge
    assert not any("dks05h0a" in s and "master" in s for s in shells)
    assert any("dks05h0a netns dks05-void" in s for s in shells)
    # no step adds a route (so no default route), and forwarding is off on the bridge
    assert not any(s.argv[:2] == ("ip", "route") or "route" in s.argv for s in steps)
    forwarding = [s for s in steps if s.path.endswith("/dks05-br/forwarding")]
    assert [s.content for s in forwarding] == ["0\n"]
    uts = "/run/ddpkit-sim/dks05/uts-n1"
    hostname_step = shells.index(f"unshare --uts={uts} hostname node1")
    assert [s.path for s in steps[:hostname_step] if s.path == uts] == [uts]


def test_hosts_file_names_the_node_on_eth0_and_no_other_node() -> None:
    cluster = build_cluster(SimSpec(nodes=3, name="dks06", subnet="10.77.6.0/24"))
    text = hosts_file_text(cluster.nodes[1])
    entries = [line.split() for line in text.splitlines() if line and not line.startswith("#")]
    assert ["172.17.0.4", "node1"] in entries
    assert ["127.0.0.1", "localhost"] in entries
    assert not any("node0" in e or "node2" in e for e in entries)
    assert not re.search(r"10\.77\.6\.", text)


def test_rate_shapes_both_ends_of_every_private_veth() -> None:
    spec = SimSpec(nodes=2, name="dks07", subnet="10.77.7.0/24", rate="100mbit", ifnames={1: "ens5"})
    tc = [s.argv for s in plan_up(spec) if s.argv[:1] == ("tc",)]
    burst = str(tbf_burst_bytes(100 * 10**6))
    expect_tail = ("root", "tbf", "rate", "100mbit", "burst", burst, "latency", "50ms")
    assert sorted(tc) == sorted([
        ("tc", "-n", "dks07-n0", "qdisc", "add", "dev", "eth1", *expect_tail),
        ("tc", "-n", "dks07-n1", "qdisc", "add", "dev", "ens5", *expect_tail),
        ("tc", "qdisc", "add", "dev", "dks07h0b", *expect_tail),
        ("tc", "qdisc", "add", "dev", "dks07h1b", *expect_tail),
    ])


def test_no_rate_means_no_tc_at_all() -> None:
    spec = SimSpec(nodes=2, name="dks08", subnet="10.77.8.0/24")
    assert not [s for s in plan_up(spec) if s.argv[:1] == ("tc",)]
    assert "tc" not in tools_for_up(spec)
    assert set(tools_for_up(spec)) == {"hostname", "ip", "unshare"}


def test_delay_and_loss_put_netem_at_the_root_and_tbf_under_it() -> None:
    spec = SimSpec(nodes=1, name="dks09", subnet="10.77.9.0/24", rate="1gbit", delay="5ms",
                   loss="0.1%")
    tc = [s.argv for s in plan_up(spec) if s.argv[:3] == ("tc", "-n", "dks09-n0")]
    assert tc[0][3:] == ("qdisc", "add", "dev", "eth1", "root", "handle", "1:", "netem",
                         "delay", "5ms", "loss", "0.1%")
    assert tc[1][3:9] == ("qdisc", "add", "dev", "eth1", "parent", "1:1")
    assert "tbf" in tc[1] and "1gbit" in tc[1]
    assert spec.needs_netem and not SimSpec(nodes=1, rate="1gbit").needs_netem


def test_node_argv_enters_the_network_namespace_and_the_hostname() -> None:
    cluster = build_cluster(SimSpec(nodes=2, name="dks10", subnet="10.77.10.0/24"))
    assert node_argv(cluster, 1, ["hostname", "-f"]) == [
        "ip", "netns", "exec", "dks10-n1", "nsenter", "--uts=/run/ddpkit-sim/dks10/uts-n1", "--",
        "hostname", "-f",
    ]
    with pytest.raises(IndexError):
        node_argv(cluster, 2, ["true"])


def test_dry_run_shell_lines_are_valid_shell_words() -> None:
    import shlex

    for step in plan_up(SimSpec(nodes=2, name="dks11", subnet="10.77.11.0/24", rate="1gbit")):
        words = shlex.split(step.shell())
        assert words
        if step.argv:
            assert tuple(words) == step.argv


def test_the_ssh_plan_names_every_node_s_server_and_the_files_up_writes() -> None:
    import shlex

    from ddpkit.sim import ssh as sim_ssh

    cluster = build_cluster(SimSpec(nodes=3, name="dks12", subnet="10.77.12.0/24"))
    steps = sim_ssh.plan(cluster)
    files = sim_ssh.layout("dks12")
    servers = [s for s in steps if "sshd" in s.argv]
    assert [s.argv[-1] for s in servers] == [files.sshd_config(i) for i in range(3)]
    assert [s.argv[:3] for s in servers] == [("ip", "netns", "exec")] * 3
    written = {s.path: s.content for s in steps if not s.argv}
    assert written[files.hostfile] == sim_ssh.hostfile_text(cluster)
    assert written[files.client_config] == sim_ssh.client_config_text(files)
    assert "ListenAddress 10.77.12.4" in written[files.sshd_config(2)]
    for step in steps:
        assert shlex.split(step.shell())


# -- flag values ---------------------------------------------------------------------------------


def test_ifname_style_parses_lists_and_repeats() -> None:
    assert parse_ifname_style(["1=ens5"]) == {1: "ens5"}
    assert parse_ifname_style(["1=ens5,2=enp0s8", " 0 = eth7 "]) == {0: "eth7", 1: "ens5", 2: "enp0s8"}
    assert parse_ifname_style([]) == {}
    assert parse_ifname_style(["1=ens5", "1=ens5"]) == {1: "ens5"}


@pytest.mark.parametrize("value", ["ens5", "=ens5", "1=", "x=ens5", "1:ens5", "1=ens5,2=ens6,1=ens7"])
def test_ifname_style_syntax_errors(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_ifname_style([value])
    assert info.value.error_id == "sim-bad-ifname-style"
    assert "INDEX=NAME" in info.value.hint or "one private NIC" in info.value.hint


@pytest.mark.parametrize("ifnames", [{0: "eth0"}, {0: "lo"}, {0: "a" * 16}, {0: "en s5"},
                                     {0: "en/5"}, {2: "ens5"}, {-1: "ens5"}])
def test_ifname_values_that_cannot_work_are_refused(ifnames: dict[int, str]) -> None:
    with pytest.raises(ConfigError) as info:
        SimSpec(nodes=2, ifnames=ifnames)
    assert info.value.error_id == "sim-bad-ifname-style"


def test_ifname_default_entries_are_dropped_so_equal_specs_compare_equal() -> None:
    assert SimSpec(nodes=2, ifnames={1: "eth1"}) == SimSpec(nodes=2)
    assert SimSpec(nodes=2, ifnames={1: "ens5"}) != SimSpec(nodes=2)
    assert dict(SimSpec(nodes=2, ifnames={0: "eth1", 1: "ens5"}).ifnames) == {1: "ens5"}


@pytest.mark.parametrize(
    ("text", "bits", "canonical"),
    [("1gbit", 10**9, "1gbit"), ("1Gbit", 10**9, "1gbit"), ("100mbit", 10**8, "100mbit"),
     ("2.5gbit", 25 * 10**8, "2500mbit"), ("1000mbit", 10**9, "1gbit"), ("64kbit", 64000, "64kbit"),
     ("1500000bit", 1_500_000, "1500kbit"), (" 10 mbit ", 10**7, "10mbit")],
)
def test_rate_parsing_and_canonical_form(text: str, bits: int, canonical: str) -> None:
    assert parse_rate(text) == bits
    assert format_rate(bits) == canonical
    assert SimSpec(nodes=1, rate=text).rate == canonical


@pytest.mark.parametrize("text", ["1gbps", "1g", "fast", "", "-1gbit", "1kbit", "1tbit"])
def test_bad_rates_are_refused(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_rate(text)
    assert info.value.error_id == "sim-bad-rate"


def test_tbf_burst_is_four_milliseconds_of_traffic_but_at_least_64_kib() -> None:
    assert tbf_burst_bytes(10**9) == 500_000
    assert tbf_burst_bytes(10**7) == 64 * 1024


def test_delay_and_loss_parsing() -> None:
    assert parse_delay("5ms") == 5000 and parse_delay("250us") == 250 and parse_delay("1s") == 10**6
    assert SimSpec(nodes=1, delay="0.5ms").delay == "500us"
    assert SimSpec(nodes=1, delay="1s").delay == "1000ms"
    assert parse_loss("0.1%") == 0.1
    for bad, error_id in [("5", "sim-bad-delay"), ("0ms", "sim-bad-delay"), ("11s", "sim-bad-delay")]:
        with pytest.raises(ConfigError) as info:
            parse_delay(bad)
        assert info.value.error_id == error_id
    for bad in ("1", "0%", "101%"):
        with pytest.raises(ConfigError) as info:
            parse_loss(bad)
        assert info.value.error_id == "sim-bad-loss"


def test_spec_round_trips_through_its_dict() -> None:
    spec = SimSpec(nodes=3, name="dks12", subnet="10.77.12.0/24", rate="1gbit", ifnames={1: "ens5"},
                   delay="2ms")
    data = spec.to_dict()
    assert data["ifnames"] == {"1": "ens5"}
    assert SimSpec.from_dict(data) == spec
    assert ipaddress.ip_network(data["subnet"]).prefixlen == 24


def test_missing_tool_names_the_debian_package(tmp_path: object) -> None:
    with pytest.raises(EnvironmentProblem) as info:
        find_tools(["ip", "nsenter"], search_path=str(tmp_path))
    assert info.value.error_id == "missing-tool"
    assert info.value.details == {"tool": "ip", "package": "iproute2"}
    assert "apt-get install iproute2" in info.value.hint
    with pytest.raises(EnvironmentProblem) as info:
        find_tools(["nsenter"], search_path=str(tmp_path))
    assert info.value.details["package"] == "util-linux"
