"""ddpkit sim on real namespaces: lifecycle, isolation like rented containers, shaping, cleanup.

Traffic goes only to addresses inside the namespaces these tests create (python sockets, no ping).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence

import pytest

from ddpkit.errors import ConfigError, EnvironmentProblem, ExitCode
from ddpkit.sim import SimCluster, SimSpec, bring_up, down, inspect, node_argv, status
from ddpkit.sim.host import run_command

LISTENER = textwrap.dedent("""
    import socket, sys, time
    host, port, wait = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, port))
    server.listen(1)
    server.settimeout(wait)
    print("listening", flush=True)
    try:
        conn, peer = server.accept()
    except socket.timeout:
        print("no connection", flush=True)
        sys.exit(0)
    conn.settimeout(60)
    total, first, data = 0, None, conn.recv(65536)
    while data:
        first = first or time.monotonic()
        total += len(data)
        if total == 2:
            conn.sendall(b"echo:" + data)
            break
        data = conn.recv(65536)
    elapsed = time.monotonic() - (first or time.monotonic())
    print(f"peer {peer[0]} bytes {total} seconds {elapsed:.3f}", flush=True)
""")

CLIENT = textwrap.dedent("""
    import socket, sys
    host, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    try:
        sock = socket.create_connection((host, port), timeout=10)
    except OSError as exc:
        print(type(exc).__name__, exc.errno, flush=True)
        sys.exit(1)
    if size == 2:
        sock.sendall(b"hi")
        print(sock.recv(100).decode(), flush=True)
    else:
        sock.sendall(b"x" * size)
        sock.shutdown(socket.SHUT_WR)
        sock.recv(1)
    print("sent", flush=True)
""")


def in_node(cluster: SimCluster, index: int, argv: Sequence[str], timeout: float = 30,
            **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(node_argv(cluster, index, argv), capture_output=True, text=True,
                          timeout=timeout, **kwargs)  # type: ignore[call-overload]


def ddpkit(*argv: str, timeout: float = 60, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ddpkit", *argv], capture_output=True, text=True,
                          timeout=timeout, **kwargs)  # type: ignore[call-overload]


def start_listener(cluster: SimCluster, index: int, host: str, port: int,
                   wait: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        node_argv(cluster, index, [sys.executable, "-c", LISTENER, host, str(port), str(wait)]),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "listening"
    return proc


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    return out


def dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_three_node_cluster_behaves_like_rented_containers(
    sim_cluster: Callable[..., SimCluster], sim_leftovers: Callable[..., list[str]],
    assert_fits: Callable[..., None]
) -> None:
    cluster = sim_cluster(nodes=3)
    name, node1 = cluster.name, cluster.nodes[1]
    assert status(name) == cluster
    found = inspect(name)
    assert found.phase == "up" and dict(found.processes) == {0: 0, 1: 0, 2: 0}

    # status, human and JSON
    human = ddpkit("sim", "status", "--name", name)
    assert human.returncode == 0, human.stderr
    assert_fits(human.stdout, human.stderr)
    rows = [line.split() for line in human.stdout.splitlines()]
    for node in cluster.nodes:
        assert [str(node.index), node.namespace, node.hostname, "eth1", f"{node.private_address}/24",
                "eth0", "172.17.0.4/16", "0"] in rows
    doc = json.loads(ddpkit("sim", "status", "--name", name, "--json").stdout)
    assert doc["schema"] == "ddpkit.sim/1" and doc["state"] == "up"
    assert [n["private_address"] for n in doc["cluster"]["nodes"]] == [
        n.private_address for n in cluster.nodes]

    # exec: hostname, exit status and stdin pass through
    assert ddpkit("sim", "exec", "--name", name, "1", "--", "hostname").stdout == "node1\n"
    assert ddpkit("sim", "exec", "--name", name, "2", "--", "sh", "-c", "exit 7").returncode == 7
    echoed = ddpkit("sim", "exec", "--name", name, "0", "--", "cat", input="through stdin\n")
    assert echoed.stdout == "through stdin\n"

    # the hostname resolves to eth0's 172.17.0.4; other nodes' names do not resolve at all
    assert in_node(cluster, 1, ["getent", "hosts", "node1"]).stdout.split() == ["172.17.0.4", "node1"]
    assert in_node(cluster, 1, ["getent", "hosts", "node0"]).returncode != 0

    # addresses and routes: eth0 172.17.0.4/16, private NIC .3, no default route
    addrs = json.loads(in_node(cluster, 1, ["ip", "-j", "-4", "addr"]).stdout)
    by_name = {a["ifname"]: [(i["local"], i["prefixlen"]) for i in a["addr_info"]] for a in addrs}
    assert by_name == {"lo": [("127.0.0.1", 8)], "eth0": [("172.17.0.4", 16)],
                       "eth1": [(node1.private_address, 24)]}
    for index in range(3):
        assert in_node(cluster, index, ["ip", "route", "show", "default"]).stdout == ""
        assert in_node(cluster, index, ["ip", "route", "get", "192.0.2.1"]).returncode != 0
    host_addrs = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", cluster.bridge],
                                capture_output=True, text=True, timeout=30).stdout
    assert f"{cluster.host_address}/24" in host_addrs

    # node0 reaches node1's private address over TCP
    listener = start_listener(cluster, 1, "0.0.0.0", 29555, wait=30)
    client = in_node(cluster, 0, [sys.executable, "-c", CLIENT, node1.private_address, "29555", "2"])
    assert client.stdout.splitlines()[0] == "echo:hi", client.stdout + client.stderr
    assert f"peer {cluster.nodes[0].private_address} bytes 2" in finish(listener)

    # ...but not node1's eth0: 172.17.0.4 is node0's own address too, so the dial stays at home
    listener = start_listener(cluster, 1, "172.17.0.4", 29556, wait=3)
    client = in_node(cluster, 0, [sys.executable, "-c", CLIENT, "172.17.0.4", "29556", "2"])
    assert client.returncode == 1 and client.stdout.startswith("ConnectionRefusedError")
    assert finish(listener).strip() == "no connection"

    # down through the CLI, as JSON: it names what it removed and leaves nothing
    removed = ddpkit("sim", "down", "--name", name, "--json")
    assert removed.returncode == 0, removed.stderr
    report = json.loads(removed.stdout)
    assert report["schema"] == "ddpkit.sim/1" and report["changed"] is True
    assert report["removed"]["namespaces"] == [f"{name}-n0", f"{name}-n1", f"{name}-n2",
                                               f"{name}-void"]
    assert report["removed"]["links"] == [f"{name}-br", f"{name}h0b", f"{name}h1b", f"{name}h2b"]
    assert sim_leftovers(name) == []
    assert status(name) is None
    again = ddpkit("sim", "down", "--name", name)
    assert again.returncode == 0 and "nothing to remove" in again.stdout


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_up_is_idempotent_and_refuses_a_different_spec(sim_reservation, run_cli, assert_fits) -> None:  # type: ignore[no-untyped-def]
    res = sim_reservation()
    args = ["sim", "up", "2", "--name", res.name, "--subnet", res.subnet, "--ifname-style", "1=ens5"]
    first = run_cli(*args, "--json")
    assert first.code == 0, first.err
    doc = first.json()
    assert doc["schema"] == "ddpkit.sim/1" and doc["changed"] is True and doc["state"] == "up"
    assert [n["private_ifname"] for n in doc["cluster"]["nodes"]] == ["eth1", "ens5"]
    links_before = sorted(os.listdir("/sys/class/net"))

    second = run_cli(*args, "--json")
    assert second.code == 0 and second.json()["changed"] is False
    human = run_cli(*args)
    assert "already up" in human.out
    assert_fits(human.out, human.err)
    assert sorted(os.listdir("/sys/class/net")) == links_before

    different = run_cli("sim", "up", "3", "--name", res.name, "--subnet", res.subnet)
    assert different.code == ExitCode.CONFIG
    assert "error [sim-exists-different]" in different.err and "sim down" in different.err
    assert inspect(res.name).cluster is not None and len(inspect(res.name).processes) == 2

    taken = run_cli("sim", "up", "2", "--name", "dksx", "--subnet", res.subnet)
    assert taken.code == ExitCode.CONFIG and "sim-subnet-in-use" in taken.err
    assert f"sim cluster {res.name}'s bridge" in " ".join(taken.err.split())


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_down_clears_a_cluster_whose_up_was_killed_half_way(sim_reservation, sim_leftovers,
                                                            run_cli) -> None:  # type: ignore[no-untyped-def]
    res = sim_reservation()
    crash = textwrap.dedent("""
        import os, signal, sys
        from ddpkit.sim import SimSpec, bring_up
        from ddpkit.sim.host import run_command
        calls = 0
        def run(tools, argv):
            global calls
            calls += 1
            if calls == int(sys.argv[3]):
                os.kill(os.getpid(), signal.SIGKILL)
            return run_command(tools, argv)
        bring_up(SimSpec(nodes=3, name=sys.argv[1], subnet=sys.argv[2]), run=run)
    """)
    proc = subprocess.run([sys.executable, "-c", crash, res.name, res.subnet, "30"], timeout=60)
    assert proc.returncode == -signal.SIGKILL
    left = sim_leftovers(res.name)
    assert f"namespace {res.name}-n0" in left and f"link {res.name}-br" in left
    assert inspect(res.name).phase == "building"
    again = run_cli("sim", "up", "3", "--name", res.name, "--subnet", res.subnet)
    assert again.code == ExitCode.CONFIG and "sim-half-built" in again.err
    shown = run_cli("sim", "status", "--name", res.name)
    assert shown.code == ExitCode.FAILURE and "half-built" in shown.out

    report = down(res.name)
    assert f"{res.name}-n0" in report.namespaces and f"{res.name}-br" in report.links
    assert sim_leftovers(res.name) == []


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_failing_step_rolls_back_everything(sim_reservation, sim_leftovers) -> None:  # type: ignore[no-untyped-def]
    res = sim_reservation()
    calls = 0

    def fail_at_step_25(tools, argv):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        if calls == 25:
            return subprocess.CompletedProcess(list(argv), 2, "", "RTNETLINK answers: injected")
        return run_command(tools, argv)

    with pytest.raises(EnvironmentProblem) as info:
        bring_up(SimSpec(nodes=3, name=res.name, subnet=res.subnet), run=fail_at_step_25)
    assert info.value.error_id == "sim-step-failed"
    assert "injected" in info.value.message and "removed again" in info.value.hint
    assert sim_leftovers(res.name) == []


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_rate_shapes_both_ends_and_really_limits_throughput(sim_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster = sim_cluster(nodes=2, rate="20mbit", ifnames={1: "ens5"})
    for node in cluster.nodes:
        inside = in_node(cluster, node.index, ["tc", "qdisc", "show", "dev", node.private_ifname])
        assert "qdisc tbf" in inside.stdout and "rate 20Mbit" in inside.stdout, inside.stdout
        outside = subprocess.run(["tc", "qdisc", "show", "dev", node.host_private_peer],
                                 capture_output=True, text=True, timeout=30)
        assert "qdisc tbf" in outside.stdout and "rate 20Mbit" in outside.stdout, outside.stdout
        public = in_node(cluster, node.index, ["tc", "qdisc", "show", "dev", "eth0"])
        assert "tbf" not in public.stdout
    size = 4 * 1024 * 1024  # 1.68 s at 20 Mbit/s; unshaped it takes milliseconds
    listener = start_listener(cluster, 1, "0.0.0.0", 29557, wait=30)
    client = in_node(cluster, 0, [sys.executable, "-c", CLIENT, cluster.nodes[1].private_address,
                                  "29557", str(size)], timeout=60)
    assert client.returncode == 0, client.stdout + client.stderr
    words = finish(listener).split()
    assert int(words[words.index("bytes") + 1]) == size
    seconds = float(words[words.index("seconds") + 1])
    assert size * 8 / seconds <= 1.25 * 20e6, f"{size * 8 / seconds / 1e6:.1f} Mbit/s"


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_down_kills_background_processes_started_in_nodes(sim_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster = sim_cluster(nodes=2)
    name = cluster.name
    orphan = ddpkit("sim", "exec", "--name", name, "0", "--", "sh", "-c",
                    "setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo $!")
    orphan_pid = int(orphan.stdout.strip())
    attached = subprocess.Popen([sys.executable, "-m", "ddpkit", "sim", "exec", "--name", name, "1",
                                 "--", "sleep", "300"])
    try:
        deadline = time.monotonic() + 20
        while inspect(name).processes.get(1, 0) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert dict(inspect(name).processes) == {0: 1, 1: 1}
        shown = ddpkit("sim", "status", "--name", name, "--json")
        assert json.loads(shown.stdout)["processes"] == {"0": 1, "1": 1}

        report = down(name)
        assert orphan_pid in report.processes_killed and len(report.processes_killed) == 2
        assert dead(orphan_pid)
        assert attached.wait(timeout=20) == 128 + signal.SIGTERM
    finally:
        if attached.poll() is None:
            attached.kill()
            attached.wait(10)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_delay_needs_netem_and_says_so_where_it_is_missing(sim_reservation, sim_leftovers) -> None:  # type: ignore[no-untyped-def]
    res = sim_reservation()
    spec = SimSpec(nodes=2, name=res.name, subnet=res.subnet, delay="5ms", rate="100mbit")
    try:
        cluster = bring_up(spec).cluster
    except EnvironmentProblem as exc:  # this kernel (sch_netem absent)
        assert exc.error_id == "netem-unavailable"
        assert "--delay/--loss" in exc.message and "--rate" in exc.hint
        assert sim_leftovers(res.name) == []  # the probe namespace is gone too
        return
    inside = in_node(cluster, 0, ["tc", "qdisc", "show", "dev", "eth1"]).stdout
    assert "netem" in inside and "delay 5ms" in inside and "tbf" in inside


@pytest.mark.root
def test_status_and_exec_of_an_absent_cluster(sim_reservation, run_cli) -> None:  # type: ignore[no-untyped-def]
    res = sim_reservation()
    shown = run_cli("sim", "status", "--name", res.name, "--json")
    assert shown.code == ExitCode.FAILURE and shown.json()["state"] == "absent"
    ran = run_cli("sim", "exec", "--name", res.name, "0", "--", "true")
    assert ran.code == ExitCode.CONFIG and "error [sim-not-up]" in ran.err


def test_non_root_gets_needs_root_but_dry_run_works(monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
                                                    run_cli, assert_fits) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    for argv in (["up", "2"], ["down"], ["status"], ["exec", "0", "--", "true"],
                 ["up", "2", "--name", "dksnr", "--json"]):
        result = run_cli("sim", *argv)
        assert result.code == ExitCode.ENVIRONMENT, (argv, result.err)
        assert "error [needs-root]" in result.err and "euid is 1000" in " ".join(result.err.split())
        assert "fix: run it as root" in result.err
    assert run_cli("sim", "up", "2", "--name", "dksnr", "--json").json()["error"]["id"] == "needs-root"
    plan = run_cli("sim", "up", "2", "--name", "dksnr", "--rate", "1gbit", "--dry-run")
    assert plan.code == 0
    assert_fits(plan.out, plan.err)
    assert "ip netns add dksnr-n1" in plan.out
    assert "tc qdisc add dev dksnrh1b root tbf rate 1gbit" in plan.out
    planned = run_cli("sim", "up", "2", "--name", "dksnr", "--dry-run", "--json").json()
    assert planned["schema"] == "ddpkit.sim/1" and planned["state"] == "planned"
    assert planned["plan"][0]["argv"] == ["ip", "netns", "add", "dksnr-void"]
    assert not os.path.exists("/run/netns/dksnr-n0")


def test_bad_values_fail_at_once_with_their_ids(run_cli) -> None:  # type: ignore[no-untyped-def]
    for argv, error_id in [
        (["up", "2", "--name", "Bad-Name"], "sim-bad-name"),
        (["up", "2", "--rate", "1gbps"], "sim-bad-rate"),
        (["up", "2", "--ifname-style", "ens5"], "sim-bad-ifname-style"),
        (["up", "2", "--ifname-style", "3=ens5"], "sim-bad-ifname-style"),
        (["up", "2", "--subnet", "8.8.8.0/24"], "sim-bad-subnet"),
        (["up", "0"], "sim-bad-node-count"),
    ]:
        result = run_cli("sim", *argv, "--dry-run")
        assert result.code == ExitCode.CONFIG, (argv, result.err)
        assert f"error [{error_id}]" in result.err and "fix:" in result.err
    assert run_cli("sim", "exec", "0").code == ExitCode.USAGE
    with pytest.raises(ConfigError):
        SimSpec(nodes=2, name="x" * 7)
