"""Checks that fail fast (issue 21): the entry point is there before a node waits for anything,
and a worker given its own address as the master's is stopped at once, naming it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ddpkit.errors import ConfigError
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.node.entry_check import entry_problem
from ddpkit.launch.node.plan import NodeFacts, plan_node
from ddpkit.net.interfaces import Address, Nic, NicKind
from ddpkit.net.route import Route


def test_a_present_readable_script_has_no_problem(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print(1)\n")
    assert entry_problem("train.py", cwd=tmp_path) is None
    assert entry_problem(str(tmp_path / "train.py"), cwd=Path("/")) is None


def test_a_missing_script_is_named_with_where_it_was_looked_for(tmp_path: Path) -> None:
    problem = entry_problem("trian.py", cwd=tmp_path)
    assert problem is not None and "trian.py does not exist" in problem and str(tmp_path) in problem


def test_directories_run_only_with_a_main(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    assert "without a __main__.py" in str(entry_problem("app", cwd=tmp_path))
    (tmp_path / "app" / "__main__.py").write_text("print(1)\n")
    assert entry_problem("app", cwd=tmp_path) is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_script_is_a_problem(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    script.chmod(0)
    assert "not readable" in str(entry_problem("train.py", cwd=tmp_path))


def test_modules_are_found_without_importing_them(tmp_path: Path) -> None:
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise SystemExit('imported!')\n")
    (pkg / "train.py").write_text("print(1)\n")
    assert entry_problem("mypkg.train", cwd=tmp_path, is_module=True) is None
    # ddpkit's own workers, as `ddpkit test` runs them, whatever kind of install this is
    assert entry_problem("ddpkit.workers.ddp_test", cwd=tmp_path, is_module=True,
                         sys_path=sys.path) is None
    problem = entry_problem("no_such_pkg_here.train", cwd=tmp_path, is_module=True,
                            sys_path=sys.path)
    assert problem is not None and "module no_such_pkg_here was not found" in problem


def test_no_python_entries_are_programs(tmp_path: Path) -> None:
    assert entry_problem("sh", cwd=tmp_path, no_python=True, env={"PATH": "/bin:/usr/bin"}) is None
    assert "nor a program on PATH" in str(entry_problem("no-such-prog", cwd=tmp_path,
                                                        no_python=True, env={"PATH": "/bin"}))
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    assert "not executable" in str(entry_problem("./run.sh", cwd=tmp_path, no_python=True))


# -- a worker given its own address as the master's -------------------------------------------

def _nic(name: str, kind: NicKind, address: str, prefix: int) -> Nic:
    return Nic(name=name, kind=kind, up=True, mtu=1500, speed_mbps=None,
               addresses=(Address("ipv4", address, prefix),))


NICS = (_nic("eth0", NicKind.VETH, "172.17.0.4", 16), _nic("eth1", NicKind.VETH, "10.0.0.3", 24),
        _nic("lo", NicKind.LOOPBACK, "127.0.0.1", 8))


def _plan(master: str, node_rank: int = 1, **config: object):  # type: ignore[no-untyped-def]
    route = Route(host=master, address=master, family="ipv4", ifname="lo", source=master,
                  local=True)
    facts = NodeFacts(hostname="node1", nics=NICS, master_addresses=(master,), route=route)
    launch = LaunchConfig(nnodes=2, node_rank=node_rank, master_addr=master, entry="t.py",
                          **config)  # type: ignore[arg-type]
    return plan_node(launch, facts, {}, python="py", run_dir="/r")


@pytest.mark.parametrize("extra", [{}, {"ifname": "eth1"}])
def test_the_guides_trap_own_eth0_address_as_master_is_an_error_naming_it(
        extra: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as info:
        _plan("172.17.0.4", **extra)
    error = info.value
    assert error.error_id == "master-address-shared"
    assert "172.17.0.4" in error.message and "eth0" in error.message and "node 1" in error.message
    assert "ddpkit nics" in error.hint


def test_loopback_masters_and_the_master_itself_are_not_the_trap() -> None:
    assert _plan("127.0.0.1").interface.ifname == "lo"
    assert _plan("10.0.0.3", node_rank=0).interface.ifname == "eth1"


def test_an_entry_problem_is_a_warning_in_the_plan_and_stops_execute_before_any_wait() -> None:
    from ddpkit.launch.node import session

    route = Route(host="10.0.0.2", address="10.0.0.2", family="ipv4", ifname="eth1",
                  source="10.0.0.3")
    facts = NodeFacts(hostname="node1", nics=NICS, master_addresses=("10.0.0.2",), route=route,
                      entry_problem="trian.py does not exist (looked in /w)")
    config = LaunchConfig(nnodes=2, node_rank=1, master_addr="10.0.0.2", entry="trian.py")
    plan = plan_node(config, facts, {}, python="py", run_dir="/r")
    assert any("trian.py does not exist" in w for w in plan.warnings)

    class Events:
        def __init__(self) -> None:
            self.lines: list[str] = []

        def waiting(self, message: str) -> None:
            self.lines.append(message)

        def planned(self, plan: object) -> None: ...

        def output(self, line: str) -> None:
            self.lines.append(line)

    events = Events()
    with pytest.raises(ConfigError) as info:
        session.execute(plan, events)
    assert info.value.error_id == "script-not-found"
    assert "node 1" in info.value.message and "trian.py" in info.value.message
    assert events.lines == []  # nothing waited for, nothing started


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", [
    ("--node-rank", "0", "--master-addr", "127.0.0.1"),  # per node: the master used to wait 601 s
    ("--ifname", "lo"),  # token mode: before the token is printed and the others join
])
def test_a_mistyped_script_stops_the_master_before_it_waits(run_cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                            monkeypatch,
                                                            mode: tuple[str, ...]) -> None:
    import time

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print(1)\n")
    started = time.monotonic()
    result = run_cli("launch", "--nnodes", "2", "--master-port", "29533", "--join-port", "29534",
                     "--run-dir", str(tmp_path / "run"), *mode, "trian.py", "--lr", "1")
    assert result.code == 3, result.err
    assert "error [script-not-found]" in result.err and "trian.py does not exist" in result.err
    assert "ddpkit join" not in result.err and "--node-rank 1" not in result.err
    assert not (tmp_path / "run").exists()
    assert time.monotonic() - started < 30  # generous: the point is no rendezvous wait
