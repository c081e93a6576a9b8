"""Warnings for NCCL settings against a recorded machine: the seed's two-NIC cloud instance."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.ncclconf.checks import settings_warnings, source_warnings
from ddpkit.ncclconf.effective import ConfSource, Setting, load_sources
from ddpkit.net.interfaces import Address, Nic, NicKind
from ddpkit.net.select import traps


def nic(name: str, kind: NicKind, *addresses: str, up: bool = True) -> Nic:
    parsed = []
    for text in addresses:
        address, prefix = text.split("/")
        parsed.append(Address("ipv6" if ":" in address else "ipv4", address, int(prefix)))
    return Nic(name, kind, up, 1500, None, tuple(parsed))


# eth0: the container/NAT address that is the same on every instance; eth1: the private network.
CLOUD = (
    nic("lo", NicKind.LOOPBACK, "127.0.0.1/8"),
    nic("eth0", NicKind.VETH, "172.17.0.4/16"),
    nic("eth1", NicKind.PHYSICAL, "10.0.0.2/24"),
    nic("eth10", NicKind.PHYSICAL, "10.9.0.2/24"),
    nic("docker0", NicKind.CONTAINER_BRIDGE, "172.17.0.1/16", up=False),
)


def env_setting(name: str, value: str) -> Setting:
    return Setting(name, value, "env")


def file_setting(name: str, value: str, path: str = "/etc/nccl.conf", line: int = 2) -> Setting:
    return Setting(name, value, "file", path, line)


def ids(settings: list[Setting]) -> list[str]:
    return [w.id for w in settings_warnings(settings, CLOUD, traps=traps)]


def test_exact_private_interface_is_clean() -> None:
    assert ids([env_setting("NCCL_SOCKET_IFNAME", "=eth1")]) == []


def test_prefix_that_also_matches_eth10_suggests_the_exact_form() -> None:
    (warning,) = settings_warnings([file_setting("NCCL_SOCKET_IFNAME", "eth1")], CLOUD,
                                   traps=traps)
    assert warning.id == "ifname-prefix-overmatch"
    assert "eth10" in warning.message
    assert "NCCL_SOCKET_IFNAME==eth1" in warning.hint
    assert (warning.path, warning.line) == ("/etc/nccl.conf", 2)
    assert "/etc/nccl.conf:2" in warning.message


def test_matches_nothing() -> None:
    (warning,) = settings_warnings([env_setting("NCCL_SOCKET_IFNAME", "=ens5")], CLOUD)
    assert warning.id == "ifname-matches-nothing"
    assert "eth1" in warning.message  # lists what exists


def test_the_seed_inline_comment_value_matches_nothing() -> None:
    value = "eth1  # 网卡名称更换您自己的"
    assert ids([file_setting("NCCL_SOCKET_IFNAME", value)]) == ["ifname-matches-nothing"]


def test_selecting_the_nat_interface_is_a_trap() -> None:
    warnings = settings_warnings([env_setting("NCCL_SOCKET_IFNAME", "=eth0")], CLOUD, traps=traps)
    assert [w.id for w in warnings] == ["ifname-selects-trap"]
    assert "172.17.0.4" in warnings[0].message


def test_prefix_selecting_several_including_a_trap() -> None:
    got = ids([env_setting("NCCL_SOCKET_IFNAME", "eth")])
    assert got == ["ifname-several-interfaces", "ifname-selects-trap"]


def test_trap_check_uses_the_net_traps_by_default_and_can_be_skipped() -> None:
    setting = env_setting("NCCL_SOCKET_IFNAME", "=eth0")
    assert [w.id for w in settings_warnings([setting], CLOUD)] == ["ifname-selects-trap"]
    assert settings_warnings([setting], CLOUD, traps=None) == ()


def test_exclude_list_selecting_a_down_bridge_and_nat_reports_traps() -> None:
    got = ids([env_setting("NCCL_SOCKET_IFNAME", "^lo,eth1")])
    assert got.count("ifname-selects-trap") == 2  # docker0 (down bridge) and eth0 (docker subnet)
    assert "ifname-several-interfaces" not in got


@pytest.mark.parametrize("value", ["e", ""])
def test_one_character_value_is_ignored_by_nccl(value: str) -> None:
    assert ids([env_setting("NCCL_SOCKET_IFNAME", value)]) == ["ifname-ignored"]


def test_spaces_in_the_list() -> None:
    got = ids([env_setting("NCCL_SOCKET_IFNAME", "=eth1, eth10")])
    assert got[0] == "ifname-whitespace"


def test_unknown_env_name_gets_a_suggestion() -> None:
    (warning,) = settings_warnings([env_setting("NCCL_SOCKET_IFNAMES", "=eth1")], CLOUD)
    assert warning.id == "unknown-nccl-variable"
    assert "NCCL_SOCKET_IFNAME" in warning.hint


def test_unknown_name_from_a_file_is_left_to_the_line_check() -> None:
    assert ids([file_setting("NCCL_SOCKET_IFNAMES", "=eth1")]) == []


def test_value_outside_the_accepted_set() -> None:
    assert ids([env_setting("NCCL_SOCKET_FAMILY", "ipv4")]) == ["value-not-accepted"]
    assert ids([env_setting("NCCL_SOCKET_FAMILY", "AF_INET6")]) == []
    assert ids([env_setting("NCCL_DEBUG", "info")]) == []  # NCCL compares case-insensitively


def test_pytorch_variable_in_a_file() -> None:
    assert ids([file_setting("NCCL_ASYNC_ERROR_HANDLING", "1")]) == ["read-by-pytorch"]
    assert ids([env_setting("NCCL_ASYNC_ERROR_HANDLING", "1")]) == []


def test_socket_thread_limits() -> None:
    assert ids([env_setting("NCCL_SOCKET_NTHREADS", "17")]) == ["socket-threads-limit"]
    both = [env_setting("NCCL_SOCKET_NTHREADS", "16"), env_setting("NCCL_NSOCKS_PERTHREAD", "8")]
    assert ids(both) == ["socket-threads-limit"]
    fine = [env_setting("NCCL_SOCKET_NTHREADS", "4"), env_setting("NCCL_NSOCKS_PERTHREAD", "4")]
    assert ids(fine) == []


def test_defaults_are_never_warned_about() -> None:
    assert ids([Setting("NCCL_SOCKET_IFNAME", "", "default")]) == []


# ------------------------------------------------------------------------------- file sources


def _sources(env: dict[str, str], home: Path, etc: Path) -> tuple[ConfSource, ...]:
    return load_sources(env, home, etc)


def test_nccl_conf_file_hides_an_existing_user_conf(tmp_path: Path) -> None:
    (tmp_path / ".nccl.conf").write_text("NCCL_SOCKET_IFNAME==eth1\n")
    job = tmp_path / "job.conf"
    job.write_text("NCCL_DEBUG=WARN\n")
    env = {"NCCL_CONF_FILE": str(job)}
    warnings = source_warnings(env, tmp_path, _sources(env, tmp_path, tmp_path / "etc"))
    assert [w.id for w in warnings] == ["conf-file-hides-user-conf"]
    assert str(tmp_path / ".nccl.conf") in warnings[0].message


def test_no_hiding_warning_without_a_user_conf(tmp_path: Path) -> None:
    job = tmp_path / "job.conf"
    job.write_text("")
    env = {"NCCL_CONF_FILE": str(job)}
    assert source_warnings(env, tmp_path, _sources(env, tmp_path, tmp_path / "etc")) == ()


def test_missing_tilde_and_relative_conf_file(tmp_path: Path) -> None:
    for value, expected in [
        (str(tmp_path / "nope.conf"), ["conf-file-missing"]),
        ("~/job.conf", ["conf-file-tilde", "conf-file-missing"]),
        ("relative/job.conf", ["conf-file-relative", "conf-file-missing"]),
    ]:
        env = {"NCCL_CONF_FILE": value}
        got = source_warnings(env, tmp_path, _sources(env, tmp_path, tmp_path / "etc"))
        assert [w.id for w in got] == expected, value


def test_unreadable_conf_file(tmp_path: Path) -> None:
    directory = tmp_path / "dir.conf"
    directory.mkdir()
    env = {"NCCL_CONF_FILE": str(directory)}
    got = source_warnings(env, tmp_path, _sources(env, tmp_path, tmp_path / "etc"))
    assert [w.id for w in got] == ["conf-file-unreadable"]


def test_home_env_differs_from_the_account_home(tmp_path: Path) -> None:
    account, elsewhere = tmp_path / "account", tmp_path / "workspace"
    account.mkdir()
    elsewhere.mkdir()
    (elsewhere / ".nccl.conf").write_text("NCCL_SOCKET_IFNAME==eth1\n")
    env = {"HOME": str(elsewhere)}
    got = source_warnings(env, account, _sources(env, account, tmp_path / "etc"))
    assert [w.id for w in got] == ["home-conf-not-read"]
    assert str(elsewhere / ".nccl.conf") in got[0].message
