"""The files ``ddpkit sim up --ssh`` writes (pure): every node's sshd, the client side, the hostfile."""

from __future__ import annotations

from ddpkit.launch.ssh.hostfile import parse_hostfile
from ddpkit.sim import SimSpec, build_cluster
from ddpkit.sim import ssh as sim_ssh


def _cluster(nodes: int = 3):  # type: ignore[no-untyped-def]
    return build_cluster(SimSpec(nodes=nodes, name="tst", subnet="10.55.0.0/24"))


def test_every_file_lives_under_the_clusters_runtime_directory() -> None:
    files = sim_ssh.layout("tst")
    paths = [files.client_key, files.known_hosts, files.client_config, files.hostfile,
             files.pids_file, files.authorized_keys, files.host_key(2), files.sshd_config(2)]
    assert all(path.startswith("/run/ddpkit-sim/tst/ssh/") for path in paths)


def test_each_sshd_listens_on_its_private_address_only_with_its_own_host_key() -> None:
    cluster = _cluster()
    files = sim_ssh.layout("tst")
    text = sim_ssh.sshd_config_text(cluster, 2, files)
    lines = text.splitlines()
    assert "ListenAddress 10.55.0.4" in lines and sum(x.startswith("ListenAddress") for x in lines) == 1
    assert f"HostKey {files.host_key(2)}" in lines
    assert "PasswordAuthentication no" in lines and "PermitRootLogin prohibit-password" in lines


def test_the_client_checks_host_keys_against_the_clusters_known_hosts_only() -> None:
    files = sim_ssh.layout("tst")
    lines = [line.strip() for line in sim_ssh.client_config_text(files).splitlines()]
    assert "StrictHostKeyChecking yes" in lines
    assert f"UserKnownHostsFile {files.known_hosts}" in lines
    assert "GlobalKnownHostsFile /dev/null" in lines and f"IdentityFile {files.client_key}" in lines
    assert not any("StrictHostKeyChecking no" in line for line in lines)


def test_the_hostfile_is_what_launch_hostfile_reads_master_first() -> None:
    cluster = _cluster(4)
    hosts = parse_hostfile(sim_ssh.hostfile_text(cluster), "hostfile")
    assert [h.name for h in hosts] == ["10.55.0.2", "10.55.0.3", "10.55.0.4", "10.55.0.5"]
    assert all(h.slots == 1 for h in hosts)
