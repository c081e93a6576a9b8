"""Validation of names/values for `nccl-conf set`, edit plans, and warnings about the result."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.errors import ConfigError, ExitCode, UsageError
from ddpkit.ncclconf.edit import (
    Change,
    EditPlan,
    check_name,
    check_value,
    parse_assignment,
    plan_edit,
    target_warnings,
)

NAMES = ["lo", "eth0", "eth1", "eth10"]


def test_parse_assignment_keeps_the_exact_form() -> None:
    assert parse_assignment("NCCL_SOCKET_IFNAME==eth1") == ("NCCL_SOCKET_IFNAME", "=eth1")
    assert parse_assignment("NCCL_ALGO=a=b") == ("NCCL_ALGO", "a=b")
    for bad in ("NCCL_DEBUG", "=x"):
        with pytest.raises(UsageError) as info:
            parse_assignment(bad)
        assert info.value.error_id == "bad-assignment"


def test_unknown_nccl_name_is_refused_with_a_suggestion() -> None:
    with pytest.raises(ConfigError) as info:
        check_name("NCCL_SOCKET_IFNAMES", force=False)
    err = info.value
    assert err.error_id == "unknown-nccl-variable"
    assert err.exit_code == ExitCode.CONFIG
    assert "NCCL_SOCKET_IFNAME" in err.hint and "--force" in err.hint
    assert err.details["suggestions"][0] == "NCCL_SOCKET_IFNAME"
    check_name("NCCL_SOCKET_IFNAMES", force=True)  # --force writes it


@pytest.mark.parametrize("name", ["GLOO_SOCKET_IFNAME", "MASTER_ADDR", "PATH"])
def test_non_nccl_names_are_refused_even_with_force(name: str) -> None:
    for force in (False, True):
        with pytest.raises(ConfigError) as info:
            check_name(name, force=force)
        assert info.value.error_id == "not-an-nccl-variable"


def test_gloo_name_hint_says_to_export_it() -> None:
    with pytest.raises(ConfigError) as info:
        check_name("GLOO_SOCKET_IFNAME", force=False)
    assert "export GLOO_SOCKET_IFNAME" in info.value.hint


def test_bad_names_and_nccl_conf_file() -> None:
    with pytest.raises(ConfigError) as info:
        check_name("NCCL DEBUG", force=True)
    assert info.value.error_id == "bad-variable-name"
    with pytest.raises(ConfigError) as info:
        check_name("NCCL_CONF_FILE", force=False)
    assert info.value.error_id == "conf-file-in-file"
    check_name("NCCL_DEBUG", force=False)


def test_interface_value_must_match_a_local_interface() -> None:
    check_value("NCCL_SOCKET_IFNAME", "=eth1", NAMES, force=False)
    check_value("NCCL_SOCKET_IFNAME", "^docker,lo", NAMES, force=False)
    with pytest.raises(ConfigError) as info:
        check_value("NCCL_SOCKET_IFNAME", "=ens5", NAMES, force=False)
    err = info.value
    assert err.error_id == "interface-not-found"
    assert "eth1" in err.message and err.details["available"] == sorted(NAMES)
    check_value("NCCL_SOCKET_IFNAME", "=ens5", NAMES, force=True)  # a file for another machine


def test_one_character_interface_value_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        check_value("NCCL_SOCKET_IFNAME", "e", NAMES, force=False)
    assert info.value.error_id == "ifname-ignored"


@pytest.mark.parametrize("value", [" INFO", "INFO ", ""])
def test_padded_or_empty_values_are_refused_without_force(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_value("NCCL_DEBUG", value, NAMES, force=False)
    assert info.value.error_id == "invalid-value"
    check_value("NCCL_DEBUG", value, NAMES, force=True)


@pytest.mark.parametrize("value", ["INFO\nNCCL_IB_DISABLE=1", "INFO\r", "a\0b"])
def test_line_breaks_are_refused_even_with_force(value: str) -> None:
    with pytest.raises(ConfigError):
        check_value("NCCL_DEBUG", value, NAMES, force=True)


def test_enumerated_values() -> None:
    with pytest.raises(ConfigError) as info:
        check_value("NCCL_SOCKET_FAMILY", "ipv4", NAMES, force=False)
    assert "AF_INET" in info.value.hint
    check_value("NCCL_DEBUG", "warn", NAMES, force=False)


def test_plan_edit_diff_and_changes(tmp_path: Path) -> None:
    path = tmp_path / "nccl.conf"
    path.write_text("# keep\nNCCL_DEBUG=WARN\n")
    plan = plan_edit(path, updates={"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "=eth1"})
    assert plan.existed and plan.changed
    assert plan.new_text == "# keep\nNCCL_DEBUG=INFO\nNCCL_SOCKET_IFNAME==eth1\n"
    assert plan.changes == (Change("NCCL_DEBUG", "WARN", "INFO"),
                            Change("NCCL_SOCKET_IFNAME", None, "=eth1"))
    assert "-NCCL_DEBUG=WARN\n" in plan.diff and "+NCCL_SOCKET_IFNAME==eth1\n" in plan.diff
    assert path.read_text() == "# keep\nNCCL_DEBUG=WARN\n"  # planning writes nothing


def test_plan_for_a_missing_file_and_for_no_change(tmp_path: Path) -> None:
    path = tmp_path / "new.conf"
    plan = plan_edit(path, updates={"NCCL_DEBUG": "INFO"})
    assert not plan.existed and plan.old_text == "" and plan.diff.startswith("--- /dev/null")
    same = plan_edit(path, current=(True, "NCCL_DEBUG=INFO\n"), updates={"NCCL_DEBUG": "INFO"})
    assert not same.changed and same.changes == () and same.diff == ""


def test_unset_plan_removes_all_lines(tmp_path: Path) -> None:
    plan = plan_edit(tmp_path / "x", current=(True, "NCCL_DEBUG=WARN\nNCCL_DEBUG=INFO\n"),
                     removals=["NCCL_DEBUG", "NCCL_ALGO"])
    assert plan.new_text == ""
    assert plan.changes == (Change("NCCL_DEBUG", "WARN", None),)


def _plan(path: Path, **updates: str) -> EditPlan:
    return plan_edit(path, current=(path.exists(), path.read_text() if path.exists() else ""),
                     updates=updates)


def test_value_hidden_by_the_environment_is_reported(tmp_path: Path) -> None:
    etc = tmp_path / "etc.conf"
    plan = _plan(etc, NCCL_SOCKET_IFNAME="=eth1")
    env = {"NCCL_SOCKET_IFNAME": "eth0"}
    (warning,) = target_warnings(plan, env, tmp_path, etc)
    assert warning.id == "setting-shadowed"
    assert "environment" in warning.message and "eth0" in warning.message


def test_value_hidden_by_the_user_conf_is_reported_with_its_line(tmp_path: Path) -> None:
    (tmp_path / ".nccl.conf").write_text("# mine\nNCCL_SOCKET_IFNAME=eth0\n")
    etc = tmp_path / "etc.conf"
    (warning,) = target_warnings(_plan(etc, NCCL_SOCKET_IFNAME="=eth1"), {}, tmp_path, etc)
    assert warning.id == "setting-shadowed"
    assert (warning.path, warning.line) == (str(tmp_path / ".nccl.conf"), 2)


def test_writing_the_winning_file_has_no_warning(tmp_path: Path) -> None:
    etc = tmp_path / "etc.conf"
    etc.write_text("NCCL_SOCKET_IFNAME=eth0\n")
    user = tmp_path / ".nccl.conf"
    assert target_warnings(_plan(user, NCCL_SOCKET_IFNAME="=eth1"), {}, tmp_path, etc) == ()
    assert target_warnings(_plan(etc, NCCL_SOCKET_IFNAME="=eth1"), {}, tmp_path, etc) == ()


def test_a_file_nccl_does_not_read_is_reported(tmp_path: Path) -> None:
    other = tmp_path / "somewhere.conf"
    plan = _plan(other, NCCL_DEBUG="INFO")
    (warning,) = target_warnings(plan, {}, tmp_path, tmp_path / "etc.conf")
    assert warning.id == "target-not-read"
    assert f"NCCL_CONF_FILE={other}" in warning.hint
    assert target_warnings(plan, {"NCCL_CONF_FILE": str(other)}, tmp_path,
                           tmp_path / "etc.conf") == ()


def test_user_conf_hidden_by_nccl_conf_file(tmp_path: Path) -> None:
    job = tmp_path / "job.conf"
    plan = _plan(tmp_path / ".nccl.conf", NCCL_DEBUG="INFO")
    (warning,) = target_warnings(plan, {"NCCL_CONF_FILE": str(job)}, tmp_path, tmp_path / "etc")
    assert warning.id == "target-not-read"


def test_unset_that_leaves_a_value_elsewhere(tmp_path: Path) -> None:
    etc = tmp_path / "etc.conf"
    etc.write_text("NCCL_DEBUG=WARN\n")
    user = tmp_path / ".nccl.conf"
    user.write_text("NCCL_DEBUG=INFO\n")
    plan = plan_edit(user, removals=["NCCL_DEBUG"])
    (warning,) = target_warnings(plan, {}, tmp_path, etc)
    assert warning.id == "still-set-elsewhere"
    assert (warning.path, warning.line) == (str(etc), 1)
