"""Hostfile and --hosts parsing: the formats users already have, and every malformed line named."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.errors import ConfigError
from ddpkit.launch.ssh.hostfile import Host, load_hostfile, parse_hostfile, parse_hosts

DEEPSPEED = """\
# DeepSpeed's format
worker-0 slots=8
worker-1 slots=8   # a comment after the entry

10.0.0.4 slots=4 max_slots=4
"""


def test_deepspeed_and_openmpi_lines() -> None:
    hosts = parse_hostfile(DEEPSPEED, "hosts.txt")
    assert [(h.name, h.slots) for h in hosts] == [("worker-0", 8), ("worker-1", 8), ("10.0.0.4", 4)]
    assert [h.origin for h in hosts] == ["hosts.txt:2", "hosts.txt:3", "hosts.txt:5"]
    assert all(h.user is None and h.port is None for h in hosts)


def test_mpich_colon_means_slots() -> None:
    hosts = parse_hostfile("node-a:2\nnode-b\n", "mpi.txt")
    assert [(h.name, h.slots) for h in hosts] == [("node-a", 2), ("node-b", None)]


def test_user_host_port_with_slots_keyword() -> None:
    (host,) = parse_hostfile("ubuntu@10.0.0.9:2222 slots=8\n", "f")
    assert host == Host(name="10.0.0.9", user="ubuntu", port=2222, slots=8, origin="f:1")
    assert host.ssh_target == "ubuntu@10.0.0.9"


def test_port_keyword_and_ipv6_in_brackets() -> None:
    hosts = parse_hostfile("[fd00::5]:4\nroot@[fd00::6] port=2200 slots=1\n", "f")
    assert (hosts[0].name, hosts[0].slots, hosts[0].port) == ("fd00::5", 4, None)
    assert (hosts[1].name, hosts[1].user, hosts[1].port, hosts[1].slots) == ("fd00::6", "root", 2200, 1)


@pytest.mark.parametrize("line, why", [
    ("node1 slots=abc", "whole number"),
    ("node1 slots=0", "outside 1..1024"),
    ("node1 gpus=8", "unknown setting 'gpus'"),
    ("node1 slots", "is not KEY=VALUE"),
    ("node1 slots=2 slots=4", "given twice"),
    ("node1:2222", "for an ssh port write"),
    ("node1:2 slots=4 port=22", "port is given twice"),
    ("node1:99999 slots=1", "not a TCP port"),
    ("no;de1 slots=2", "is not a host name"),
    ("-oProxyCommand=x slots=1", "starts with '-'"),
    ("$(reboot) slots=1", "is not a host name"),
    ("bad user@node1", "is not KEY=VALUE"),
    ("us;er@node1", "is not a user name"),
    ("[not-v6]:2", "is not an IPv6 address"),
    ("a@b@c", "is not [USER@]HOST[:N]"),
])
def test_a_malformed_line_is_named_by_file_and_line(line: str, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_hostfile(f"# header\ngood-host slots=1\n{line}\n", "cluster/hosts")
    exc = caught.value
    assert exc.error_id == "bad-hostfile"
    assert exc.message.startswith("cluster/hosts:3: ")
    assert why in exc.message
    assert exc.details == {"path": "cluster/hosts", "line": 3}


def test_an_empty_hostfile_is_an_error() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_hostfile("# nothing\n\n", "empty.txt")
    assert caught.value.error_id == "empty-hostfile"


def test_load_hostfile_reads_and_names_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_text("a slots=1\nb slots=2\n")
    assert [h.name for h in load_hostfile(path)] == ["a", "b"]
    with pytest.raises(ConfigError) as caught:
        load_hostfile(tmp_path / "nope")
    assert caught.value.error_id == "hostfile-not-found"


def test_hosts_flag() -> None:
    hosts = parse_hosts("10.0.0.2:2, 10.0.0.3,root@node-9:1")
    assert [(h.name, h.user, h.slots) for h in hosts] == [
        ("10.0.0.2", None, 2), ("10.0.0.3", None, None), ("node-9", "root", 1)]
    assert hosts[1].origin == "--hosts item 2"


@pytest.mark.parametrize("spec", ["a,,b", "a;touch /tmp/x", "a b", "a,'b'", "a,-F/etc/passwd",
                                  "a,`id`"])
def test_hostile_hosts_are_rejected(spec: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_hosts(spec)
    assert caught.value.error_id == "bad-hosts"


# --- size limits, odd files, duplicates (issue 11) -------------------------------------------------


def test_more_than_max_hosts_is_refused_at_the_first_extra_line() -> None:
    from ddpkit.launch.ssh.hostfile import MAX_HOSTS, parse_hostfile

    lines = [f"10.{i // 250}.{i % 250}.9 slots=1" for i in range(MAX_HOSTS)]
    assert len(parse_hostfile("\n".join(lines), "h.txt")) == MAX_HOSTS
    with pytest.raises(ConfigError) as info:
        parse_hostfile("\n".join([*lines, "10.99.0.1", "bad@@line"]), "h.txt")
    assert info.value.error_id == "too-many-hosts" and f"line {MAX_HOSTS + 1}" in info.value.message


def test_hosts_flag_with_too_many_entries() -> None:
    from ddpkit.launch.ssh.hostfile import MAX_HOSTS, parse_hosts

    with pytest.raises(ConfigError) as info:
        parse_hosts(",".join(["10.0.0.2"] * (MAX_HOSTS + 1)))
    assert info.value.error_id == "too-many-hosts"


def test_a_huge_or_odd_hostfile_is_refused_before_it_is_read(tmp_path: Path) -> None:
    import os

    from ddpkit.launch.ssh.hostfile import MAX_HOSTFILE_BYTES, load_hostfile

    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        f.truncate(MAX_HOSTFILE_BYTES + 1)  # sparse: nothing to read, only its size counts
    with pytest.raises(ConfigError) as info:
        load_hostfile(huge)
    assert info.value.error_id == "too-many-hosts"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError) as info:
        load_hostfile(fifo)  # reading would block until a writer came
    assert info.value.error_id == "hostfile-unreadable" and "not a regular file" in info.value.message


def test_duplicate_hosts_are_named_with_both_lines() -> None:
    from ddpkit.launch.ssh.hostfile import duplicate_warnings, parse_hostfile

    hosts = parse_hostfile("10.0.0.2 slots=8\n10.0.0.3 slots=8\n10.0.0.2 slots=8\n"
                           "root@10.0.0.3:2222 slots=1\n", "h.txt")
    warnings = duplicate_warnings(hosts)
    assert len(warnings) == 1 and warnings[0].startswith("h.txt:3: 10.0.0.2 is listed again (first "
                                                          "at h.txt:1)")


def test_interfaces_are_read_once_for_the_whole_host_list(monkeypatch: pytest.MonkeyPatch) -> None:
    import ddpkit.net.interfaces as interfaces
    from ddpkit.launch.ssh.driver import this_machine_flags
    from ddpkit.launch.ssh.hostfile import parse_hosts

    calls: list[int] = []
    real = interfaces.discover
    monkeypatch.setattr(interfaces, "discover", lambda *a, **k: calls.append(1) or real(*a, **k))
    hosts = parse_hosts(",".join(f"10.77.{i // 250}.{i % 250 + 1}" for i in range(500)))
    flags = this_machine_flags((*hosts, *parse_hosts("127.0.0.1,root@10.0.0.9")))
    assert len(calls) == 1 and flags[-2:] == (True, False) and not any(flags[:-2])
