"""Preflight verdicts per host and the choice of the master address."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ddpkit import __version__
from ddpkit.errors import EnvironmentProblem, NetworkProblem
from ddpkit.launch.ssh.hostfile import Host
from ddpkit.launch.ssh.probe import (
    PROBE_MARK,
    PROBE_SCRIPT,
    HostProbe,
    choose_master,
    judge,
    require_fit,
)

GOOD = {"python": "/usr/bin/python3", "hostname": "node1", "ddpkit": __version__, "torch": "2.13.0",
        "cwd": "/work", "ssh_connection": "10.0.0.2 50000 10.0.0.3 22"}


def _judge(returncode: int = 0, info: dict | None = None, stderr: str = "",  # type: ignore[type-arg]
           local: bool = False) -> HostProbe:
    stdout = f"welcome banner\n{PROBE_MARK}{json.dumps(info)}\n" if info is not None else ""
    return judge(Host(name="10.0.0.3"), 1, local=local, returncode=returncode, stdout=stdout,
                 stderr=stderr, python="/usr/bin/python3", version=__version__)


def test_a_fit_host_and_its_ssh_connection() -> None:
    probe = _judge(info=GOOD)
    assert probe.ok and probe.hostname == "node1"
    assert (probe.client_address, probe.server_address) == ("10.0.0.2", "10.0.0.3")


def test_every_problem_of_a_host_is_listed() -> None:
    bad = {**GOOD, "cwd_error": "No such file or directory: /work", "ddpkit": "0.0.1",
           "torch_error": "No module named 'torch'"}
    problems = _judge(info=bad).problems
    assert len(problems) == 3
    assert "working directory missing" in problems[0]
    assert f"ddpkit 0.0.1 there, {__version__} here" in problems[1]
    assert "torch is not installed" in problems[2]


@pytest.mark.parametrize("code, stderr, expected", [
    (255, "ssh: connect to host 10.0.0.3 port 22: No route to host", "unreachable over ssh: ssh: "
                                                                     "connect to host 10.0.0.3"),
    (255, "root@10.0.0.3: Permission denied (publickey).", "unreachable over ssh: root@10.0.0.3: "
                                                          "Permission denied"),
    (127, "bash: /opt/py/bin/python: No such file or directory", "no python at /usr/bin/python3"),
    (1, "Traceback...\nSyntaxError: x", "the preflight program failed (exit 1)"),
])
def test_hosts_that_do_not_answer(code: int, stderr: str, expected: str) -> None:
    probe = _judge(returncode=code, stderr=stderr)
    assert not probe.ok and probe.problems[0].startswith(expected)


def test_require_fit_names_every_failing_host() -> None:
    good = _judge(info=GOOD)
    down = judge(Host(name="10.0.0.9"), 2, local=False, returncode=255, stdout="",
                 stderr="ssh: connect to host 10.0.0.9 port 22: Connection timed out",
                 python="p", version=__version__)
    old = judge(Host(name="10.0.0.8"), 3, local=False, returncode=0,
                stdout=PROBE_MARK + json.dumps({**GOOD, "ddpkit": "0.0.1"}), stderr="",
                python="p", version=__version__)
    with pytest.raises(EnvironmentProblem) as caught:
        require_fit([good, down, old])
    message = caught.value.message
    assert caught.value.error_id == "preflight-failed"
    assert message.startswith("2 of 3 hosts are not ready")
    assert "node 2 10.0.0.9: unreachable" in message and "node 3 10.0.0.8: ddpkit 0.0.1" in message
    with pytest.raises(NetworkProblem):  # only unreachable hosts: a network problem
        require_fit([good, down])
    require_fit([good])


def test_the_probe_program_runs_here() -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE_SCRIPT, "/"], capture_output=True, text=True,
                          timeout=60)
    probe = judge(Host(name="localhost"), 0, local=True, returncode=proc.returncode,
                  stdout=proc.stdout, stderr=proc.stderr, python=sys.executable, version=__version__)
    assert probe.ok, probe.problems
    assert probe.info["cwd"] == "/" and probe.info["ddpkit"] == __version__


def _probe(rank: int, name: str, *, local: bool, ssh: str = "") -> HostProbe:
    return HostProbe(Host(name=name), rank, local, (), {"ssh_connection": ssh, "hostname": f"n{rank}"})


def test_master_address_is_node0s_source_on_its_route_to_node1() -> None:
    asked: list[tuple[str, str]] = []

    def here(target: str) -> tuple[str, str]:
        asked.append(("here", target))
        return "10.0.0.2", "eth1"

    def there(target: str) -> tuple[str, str]:
        asked.append(("there", target))
        return "10.0.0.2", "eth1"

    local_master = [_probe(0, "10.0.0.2", local=True),
                    _probe(1, "10.0.0.3", local=False, ssh="10.0.0.2 4000 10.0.0.3 22")]
    choice = choose_master(local_master, explicit=None, route_here=here, route_on_master=there)
    assert choice.address == "10.0.0.2" and "via eth1" in choice.reason
    assert asked == [("here", "10.0.0.3")]
    asked.clear()
    remote_master = [_probe(0, "10.0.0.2", local=False, ssh="10.0.0.1 4000 10.0.0.2 22"),
                     _probe(1, "10.0.0.3", local=False, ssh="10.0.0.1 4001 10.0.0.3 22")]
    choose_master(remote_master, explicit=None, route_here=here, route_on_master=there)
    assert asked == [("there", "10.0.0.3")]
    assert choose_master(remote_master, explicit="10.9.9.9", route_here=here,
                         route_on_master=there).address == "10.9.9.9"
    assert choose_master(remote_master[:1], explicit=None, route_here=here,
                         route_on_master=there).address == "127.0.0.1"


def test_no_route_from_the_master_is_a_clear_error() -> None:
    from ddpkit.errors import NetworkProblem as Problem

    def fails(target: str) -> tuple[str, str]:
        raise Problem("no-route", f"no route to {target}")

    probes = [_probe(0, "a", local=True), _probe(1, "b", local=False, ssh="1.1.1.1 1 10.0.0.3 22")]
    with pytest.raises(NetworkProblem) as caught:
        choose_master(probes, explicit=None, route_here=fails, route_on_master=fails)
    assert caught.value.error_id == "master-address-unknown"
