"""`ddpkit nccl-conf` end to end, in process, on a recorded two-NIC machine and temporary files.

Never touches the real /etc/nccl.conf or ~/.nccl.conf: SYSTEM_CONF and the home directory are
pointed into tmp_path, and the interface list is the seed's cloud instance.
"""

from __future__ import annotations

import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from ddpkit.cli.commands import nccl_conf
from ddpkit.errors import ExitCode
from ddpkit.net.interfaces import Address, Nic, NicKind
from ddpkit.net.route import Route
from ddpkit.net.select import Recommendation, recommend


def _nic(name: str, kind: NicKind, address: str, prefix: int) -> Nic:
    return Nic(name, kind, True, 1500, None, (Address("ipv4", address, prefix),))


CLOUD = (
    _nic("lo", NicKind.LOOPBACK, "127.0.0.1", 8),
    _nic("eth0", NicKind.VETH, "172.17.0.4", 16),
    _nic("eth1", NicKind.PHYSICAL, "10.0.0.2", 24),
    _nic("eth10", NicKind.PHYSICAL, "10.9.0.2", 24),
)


@dataclass
class Machine:
    home: Path
    etc: Path
    routes: dict[str, str]  # master -> interface the route leaves through

    @property
    def user_conf(self) -> Path:
        return self.home / ".nccl.conf"


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Machine:
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "etc").mkdir()
    m = Machine(home, tmp_path / "etc" / "nccl.conf", {"10.0.0.3": "eth1", "172.17.0.9": "eth0"})

    def route_recommendation(host: str, nics: Sequence[Nic]) -> Recommendation:
        ifname = m.routes[host.split(":")[0]]
        source = next(n for n in nics if n.name == ifname).addresses[0].address
        return recommend(nics, Route(host, host, "ipv4", ifname, source))

    monkeypatch.setattr(nccl_conf, "SYSTEM_CONF", m.etc)
    monkeypatch.setattr(nccl_conf, "nccl_home", lambda: home)
    monkeypatch.setattr(nccl_conf, "local_interfaces", lambda: CLOUD)
    monkeypatch.setattr(nccl_conf, "route_recommendation", route_recommendation)
    monkeypatch.setenv("HOME", str(home))
    return m


def test_show_lists_env_files_and_defaults_with_provenance(run_cli, machine: Machine,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    machine.etc.write_text("# site\nNCCL_SOCKET_IFNAME==eth1\nNCCL_DEBUG=WARN\n")
    machine.user_conf.write_text("NCCL_IB_DISABLE=1\n")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    result = run_cli("nccl-conf", "show", "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["schema"] == "ddpkit.nccl-conf/1"
    assert [f["path"] for f in doc["files"]] == [str(machine.user_conf), str(machine.etc)]
    settings = {s["name"]: s for s in doc["settings"]}
    assert list(settings) == sorted(settings)
    assert settings["NCCL_DEBUG"]["source"] == "env"
    assert settings["NCCL_DEBUG"]["shadowed"] == [
        {"value": "WARN", "source": "file", "path": str(machine.etc), "line": 3}]
    assert (settings["NCCL_SOCKET_IFNAME"]["value"], settings["NCCL_SOCKET_IFNAME"]["line"]) == (
        "=eth1", 2)
    assert settings["NCCL_IB_DISABLE"]["path"] == str(machine.user_conf)
    assert settings["NCCL_DEBUG_SUBSYS"]["source"] == "default"
    assert doc["warnings"] == []


def test_show_text_is_a_table_with_warnings_on_stderr(run_cli, machine: Machine,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    machine.etc.write_text("NCCL_SOCKET_IFNAME=eth1  # private network\n")
    monkeypatch.setenv("COLUMNS", "300")  # the table's content, not how it wraps at 100 columns
    result = run_cli("nccl-conf", "show")
    assert result.code == 0
    assert result.out.splitlines()[1].split() == ["NAME", "VALUE", "SOURCE", "NOTE"]
    assert f"{machine.etc}:1" in result.out
    assert "[conf-inline-comment]" in result.err
    assert "[ifname-matches-nothing]" in result.err
    assert "fix:" in result.err
    assert "warning" not in result.out


def test_show_is_the_default_action(run_cli, machine: Machine) -> None:
    result = run_cli("nccl-conf", "--json")
    assert result.code == 0 and result.json()["action"] == "show"


def test_show_warns_about_prefix_overmatch_and_trap(run_cli, machine: Machine,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    machine.user_conf.write_text("NCCL_SOCKET_IFNAME=eth1\n")
    doc = run_cli("nccl-conf", "show", "--json").json()
    (warning,) = doc["warnings"]
    assert warning["id"] == "ifname-prefix-overmatch"
    assert "=eth1" in warning["hint"] and warning["line"] == 1
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "=eth0")
    doc = run_cli("nccl-conf", "show", "--json").json()
    assert [w["id"] for w in doc["warnings"]] == ["ifname-selects-trap"]


def test_show_warns_that_nccl_conf_file_hides_the_user_conf(run_cli, machine: Machine,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    machine.user_conf.write_text("NCCL_SOCKET_IFNAME==eth1\n")
    job = tmp_path / "job.conf"
    job.write_text("NCCL_DEBUG=WARN\n")
    monkeypatch.setenv("NCCL_CONF_FILE", str(job))
    doc = run_cli("nccl-conf", "show", "--json").json()
    assert [w["id"] for w in doc["warnings"]] == ["conf-file-hides-user-conf"]
    settings = {s["name"]: s for s in doc["settings"]}
    assert settings["NCCL_SOCKET_IFNAME"]["source"] == "default"
    assert settings["NCCL_DEBUG"]["path"] == str(job)


def test_set_writes_the_file_shows_a_diff_and_keeps_foreign_lines(run_cli, machine: Machine
                                                                  ) -> None:
    original = "# managed by the provider\nNCCL_DEBUG=WARN\n\nsome line NCCL ignores\n"
    machine.etc.write_text(original)
    result = run_cli("nccl-conf", "set", "NCCL_SOCKET_IFNAME==eth1", "NCCL_DEBUG=INFO")
    assert result.code == 0, result.err
    assert "-NCCL_DEBUG=WARN" in result.out and "+NCCL_SOCKET_IFNAME==eth1" in result.out
    assert machine.etc.read_text() == (
        "# managed by the provider\nNCCL_DEBUG=INFO\n\nsome line NCCL ignores\n"
        "NCCL_SOCKET_IFNAME==eth1\n"
    )
    assert stat.S_IMODE(machine.etc.stat().st_mode) == 0o644
    assert (machine.etc.parent / "nccl.conf.bak").read_text() == original
    assert f"wrote {machine.etc}" in result.err


def test_set_then_show_round_trips(run_cli, machine: Machine) -> None:
    assert run_cli("nccl-conf", "set", "NCCL_SOCKET_IFNAME==eth1").code == 0
    doc = run_cli("nccl-conf", "show", "--json").json()
    setting = {s["name"]: s for s in doc["settings"]}["NCCL_SOCKET_IFNAME"]
    assert (setting["value"], setting["source"], setting["path"]) == ("=eth1", "file",
                                                                      str(machine.etc))
    assert doc["warnings"] == []


def test_set_json_document(run_cli, machine: Machine) -> None:
    result = run_cli("nccl-conf", "set", "--user", "NCCL_DEBUG=INFO", "--json")
    assert result.code == 0
    doc = result.json()
    assert doc["schema"] == "ddpkit.nccl-conf/1"
    assert (doc["action"], doc["path"], doc["written"], doc["dry_run"]) == (
        "set", str(machine.user_conf), True, False)
    assert doc["changes"] == [{"key": "NCCL_DEBUG", "old": None, "new": "INFO"}]
    assert "+NCCL_DEBUG=INFO" in doc["diff"]
    assert doc["backup"] is None
    assert machine.user_conf.read_text() == "NCCL_DEBUG=INFO\n"


def test_dry_run_writes_nothing(run_cli, machine: Machine) -> None:
    machine.etc.write_text("NCCL_DEBUG=WARN\n")
    result = run_cli("nccl-conf", "set", "NCCL_DEBUG=INFO", "--dry-run")
    assert result.code == 0
    assert "+NCCL_DEBUG=INFO" in result.out
    assert machine.etc.read_text() == "NCCL_DEBUG=WARN\n"
    assert not (machine.etc.parent / "nccl.conf.bak").exists()
    assert "dry run" in result.err


def test_no_change_writes_nothing(run_cli, machine: Machine) -> None:
    machine.etc.write_text("NCCL_DEBUG=INFO\n")
    before = machine.etc.stat().st_ino
    result = run_cli("nccl-conf", "set", "NCCL_DEBUG=INFO", "--json")
    assert result.json()["changed"] is False and result.json()["written"] is False
    assert machine.etc.stat().st_ino == before


def test_unknown_name_is_refused_with_suggestion_unless_forced(run_cli, machine: Machine) -> None:
    result = run_cli("nccl-conf", "set", "NCCL_SOCKET_IFNAMES==eth1")
    assert result.code == ExitCode.CONFIG
    assert "error [unknown-nccl-variable]" in result.err
    assert "did you mean NCCL_SOCKET_IFNAME?" in result.err
    assert not machine.etc.exists()
    forced = run_cli("nccl-conf", "set", "NCCL_SOCKET_IFNAMES==eth1", "--force")
    assert forced.code == 0
    assert machine.etc.read_text() == "NCCL_SOCKET_IFNAMES==eth1\n"


def test_non_nccl_name_is_refused(run_cli, machine: Machine) -> None:
    result = run_cli("nccl-conf", "set", "GLOO_SOCKET_IFNAME=eth1", "--force", "--json")
    assert result.code == ExitCode.CONFIG
    assert result.json()["error"]["id"] == "not-an-nccl-variable"


def test_interface_that_does_not_exist_is_refused(run_cli, machine: Machine) -> None:
    machine.etc.write_text("# untouched\n")
    result = run_cli("nccl-conf", "set", "NCCL_SOCKET_IFNAME==ens5", "--json")
    assert result.code == ExitCode.CONFIG
    error = result.json()["error"]
    assert error["id"] == "interface-not-found"
    assert "eth1" in error["message"]
    assert machine.etc.read_text() == "# untouched\n"


def test_set_warns_when_the_environment_hides_the_new_value(run_cli, machine: Machine,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    # The seed's FAQ: "the variable did not take effect, so put it in /etc/nccl.conf" - but an
    # exported variable beats the file.
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth0")
    result = run_cli("nccl-conf", "set", "NCCL_SOCKET_IFNAME==eth1", "--json")
    assert result.code == 0
    assert [w["id"] for w in result.json()["warnings"]] == ["setting-shadowed"]


def test_set_into_a_file_nccl_does_not_read_warns(run_cli, machine: Machine,
                                                  tmp_path: Path) -> None:
    target = tmp_path / "job.conf"
    result = run_cli("nccl-conf", "set", "--file", str(target), "NCCL_DEBUG=INFO")
    assert result.code == 0
    assert "[target-not-read]" in result.err and f"NCCL_CONF_FILE={target}" in result.err
    assert target.read_text() == "NCCL_DEBUG=INFO\n"


def test_auto_writes_the_exact_form_of_the_routed_interface(run_cli, machine: Machine) -> None:
    result = run_cli("nccl-conf", "set", "--auto", "--to", "10.0.0.3:29500", "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["changes"] == [{"key": "NCCL_SOCKET_IFNAME", "old": None, "new": "=eth1"}]
    assert doc["environment"] == {"GLOO_SOCKET_IFNAME": "eth1"}
    assert machine.etc.read_text() == "NCCL_SOCKET_IFNAME==eth1\n"
    assert doc["warnings"] == []


def test_auto_through_a_trap_interface_warns(run_cli, machine: Machine) -> None:
    result = run_cli("nccl-conf", "set", "--auto", "--to", "172.17.0.9")
    assert result.code == 0
    assert machine.etc.read_text() == "NCCL_SOCKET_IFNAME==eth0\n"
    assert "[ifname-selects-trap]" in result.err
    assert "GLOO_SOCKET_IFNAME=eth0" in result.err


@pytest.mark.parametrize(
    ("argv", "error_id"),
    [
        (["set"], "nothing-to-set"),
        (["set", "--auto"], "missing-to"),
        (["set", "--to", "10.0.0.3", "NCCL_DEBUG=INFO"], "bad-usage"),
        (["set", "--auto", "--to", "10.0.0.3", "NCCL_SOCKET_IFNAME==eth1"], "bad-usage"),
        (["set", "NCCL_DEBUG"], "bad-assignment"),
        (["set", "NCCL_DEBUG=INFO", "NCCL_DEBUG=WARN"], "duplicate-key"),
        (["set", "--user", "--file", "x", "NCCL_DEBUG=INFO"], "bad-usage"),
        (["frobnicate"], "bad-usage"),
    ],
)
def test_usage_errors(run_cli, machine: Machine, argv: list[str], error_id: str) -> None:
    result = run_cli("nccl-conf", *argv)
    assert result.code == ExitCode.USAGE, result.err
    assert f"error [{error_id}]" in result.err
    assert not machine.etc.exists()


def test_unset_removes_every_line_and_keeps_the_rest(run_cli, machine: Machine) -> None:
    machine.user_conf.write_text("# mine\nNCCL_DEBUG=WARN\nNCCL_IB_DISABLE=1\nNCCL_DEBUG=INFO\n")
    result = run_cli("nccl-conf", "unset", "--user", "NCCL_DEBUG", "NCCL_ALGO")
    assert result.code == 0
    assert machine.user_conf.read_text() == "# mine\nNCCL_IB_DISABLE=1\n"
    assert "[not-in-file] NCCL_ALGO" in result.err
    assert (machine.home / ".nccl.conf.bak").exists()


def test_unset_bad_name(run_cli, machine: Machine) -> None:
    result = run_cli("nccl-conf", "unset", "NCCL DEBUG")
    assert result.code == ExitCode.CONFIG and "bad-variable-name" in result.err


def test_torchrun_style_underscore_flags(run_cli, machine: Machine) -> None:
    machine.etc.write_text("NCCL_DEBUG=WARN\n")
    assert run_cli("nccl-conf", "set", "NCCL_DEBUG=INFO", "--dry_run").code == 0
    assert machine.etc.read_text() == "NCCL_DEBUG=WARN\n"

