"""Provenance: NCCL's order env > ($NCCL_CONF_FILE | ~/.nccl.conf) > /etc/nccl.conf, no overwrite."""

from __future__ import annotations

from pathlib import Path

from ddpkit.ncclconf.effective import (
    DEFAULT,
    ENV,
    FILE,
    Shadowed,
    conf_files,
    effective_settings,
    load_effective,
    resolve_settings,
)
from ddpkit.ncclconf.file import parse_conf
from ddpkit.ncclconf.known import important_variables


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_conf_files_user_conf_when_nccl_conf_file_unset(tmp_path: Path) -> None:
    etc = tmp_path / "etc.conf"
    assert conf_files({}, tmp_path, etc) == (tmp_path / ".nccl.conf", etc)


def test_conf_files_nccl_conf_file_replaces_user_conf(tmp_path: Path) -> None:
    etc = tmp_path / "etc.conf"
    env = {"NCCL_CONF_FILE": "/opt/job/nccl.conf"}
    assert conf_files(env, tmp_path, etc) == (Path("/opt/job/nccl.conf"), etc)


def test_conf_files_empty_nccl_conf_file_counts_as_unset(tmp_path: Path) -> None:
    # NCCL checks strlen(NCCL_CONF_FILE) > 0.
    assert conf_files({"NCCL_CONF_FILE": ""}, tmp_path)[0] == tmp_path / ".nccl.conf"


def test_env_beats_first_file_beats_etc() -> None:
    first = parse_conf("NCCL_DEBUG=WARN\nNCCL_IB_DISABLE=1\n", "/home/u/.nccl.conf")
    etc = parse_conf("NCCL_DEBUG=TRACE\nNCCL_IB_DISABLE=0\nNCCL_P2P_DISABLE=1\n", "/etc/nccl.conf")
    env = {"NCCL_DEBUG": "INFO", "PATH": "/bin"}
    got = {s.name: s for s in resolve_settings(env, [first, etc], defaults=False)}
    assert set(got) == {"NCCL_DEBUG", "NCCL_IB_DISABLE", "NCCL_P2P_DISABLE"}
    debug = got["NCCL_DEBUG"]
    assert (debug.value, debug.source, debug.path) == ("INFO", ENV, None)
    assert debug.shadowed == (
        Shadowed("WARN", FILE, "/home/u/.nccl.conf", 1),
        Shadowed("TRACE", FILE, "/etc/nccl.conf", 1),
    )
    ib = got["NCCL_IB_DISABLE"]
    assert (ib.value, ib.source, ib.path, ib.line) == ("1", FILE, "/home/u/.nccl.conf", 2)
    assert ib.origin == "/home/u/.nccl.conf:2"
    p2p = got["NCCL_P2P_DISABLE"]
    assert (p2p.value, p2p.path, p2p.line, p2p.shadowed) == ("1", "/etc/nccl.conf", 3, ())


def test_within_a_file_the_first_line_wins() -> None:
    conf = parse_conf("NCCL_DEBUG=WARN\nNCCL_DEBUG=INFO\n", "f")
    (setting,) = resolve_settings({}, [conf], defaults=False)
    assert (setting.value, setting.line) == ("WARN", 1)


def test_empty_env_value_still_wins() -> None:
    # setenv(name, value, 0) does not overwrite a variable that is set, even to "".
    conf = parse_conf("NCCL_SOCKET_IFNAME==eth1\n", "f")
    (setting,) = resolve_settings({"NCCL_SOCKET_IFNAME": ""}, [conf], defaults=False)
    assert (setting.value, setting.source) == ("", ENV)


def test_non_nccl_keys_from_files_are_listed_and_env_still_wins() -> None:
    conf = parse_conf("GLOO_SOCKET_IFNAME=eth1\n", "f")
    (only,) = resolve_settings({}, [conf], defaults=False)
    assert (only.name, only.value, only.source) == ("GLOO_SOCKET_IFNAME", "eth1", FILE)
    (both,) = resolve_settings({"GLOO_SOCKET_IFNAME": "eth0"}, [conf], defaults=False)
    assert (both.value, both.source) == ("eth0", ENV)
    assert both.shadowed == (Shadowed("eth1", FILE, "f", 1),)


def test_non_nccl_env_variables_are_not_listed() -> None:
    assert resolve_settings({"HOME": "/root", "GLOO_SOCKET_IFNAME": "eth1"}, [],
                            defaults=False) == ()


def test_defaults_fill_in_the_important_variables_only_when_unset() -> None:
    settings = resolve_settings({"NCCL_DEBUG": "INFO"}, [], defaults=True)
    names = [s.name for s in settings]
    assert names == sorted(names)
    important = {v.name for v in important_variables()}
    assert set(names) == important | {"NCCL_DEBUG"}
    by_name = {s.name: s for s in settings}
    assert by_name["NCCL_DEBUG"].source == ENV
    subsys = by_name["NCCL_DEBUG_SUBSYS"]
    assert (subsys.source, subsys.value, subsys.origin) == (DEFAULT, "INIT,BOOTSTRAP,ENV",
                                                            "NCCL default")
    assert by_name["NCCL_SOCKET_IFNAME"].value == ""
    assert "ib" in by_name["NCCL_SOCKET_IFNAME"].note


def test_unreadable_first_file_is_skipped(tmp_path: Path) -> None:
    etc = _write(tmp_path / "etc.conf", "NCCL_DEBUG=WARN\n")
    first = tmp_path / "a-directory"
    first.mkdir()
    eff = load_effective({"NCCL_CONF_FILE": str(first)}, tmp_path, etc)
    assert eff.sources[0].exists and eff.sources[0].error == "is a directory"
    assert eff.sources[0].conf is None
    setting = eff.get("NCCL_DEBUG")
    assert setting is not None and setting.path == str(etc)


def test_load_effective_reads_the_files_and_reports_their_bad_lines(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _write(home / ".nccl.conf", "NCCL_SOCKET_IFNAME=eth1  # private net\n")
    etc = _write(tmp_path / "etc.conf", "# system\nNCCL_SOCKET_IFNAME=eth0\nNCCL_DEBUG = INFO\n")
    eff = load_effective({}, home, etc)
    assert [s.to_dict()["role"] for s in eff.sources] == ["user", "system"]
    ifname = eff.get("NCCL_SOCKET_IFNAME")
    assert ifname is not None
    assert ifname.value == "eth1  # private net"  # what NCCL really gets
    assert ifname.path == str(home / ".nccl.conf")
    assert [(p.id, p.path, p.line) for p in eff.problems] == [
        ("conf-inline-comment", str(home / ".nccl.conf"), 1),
        ("conf-key-whitespace", str(etc), 3),
    ]
    assert eff.get("NCCL_DEBUG") is not None and eff.get("NCCL_DEBUG").source == DEFAULT  # type: ignore[union-attr]


def test_nccl_conf_file_hides_user_conf_in_resolution(tmp_path: Path) -> None:
    _write(tmp_path / ".nccl.conf", "NCCL_DEBUG=INFO\n")
    job = _write(tmp_path / "job.conf", "NCCL_IB_DISABLE=1\n")
    etc = tmp_path / "missing-etc.conf"
    settings = {s.name: s for s in effective_settings({"NCCL_CONF_FILE": str(job)}, tmp_path, etc)}
    assert settings["NCCL_DEBUG"].source == DEFAULT  # ~/.nccl.conf is not read
    assert settings["NCCL_IB_DISABLE"].path == str(job)
    assert settings["NCCL_CONF_FILE"].source == ENV


def test_same_file_twice_is_not_reported_twice(tmp_path: Path) -> None:
    etc = _write(tmp_path / "etc.conf", "NCCL_DEBUG = INFO\nNCCL_IB_DISABLE=1\n")
    eff = load_effective({"NCCL_CONF_FILE": str(etc)}, tmp_path, etc)
    assert [p.id for p in eff.problems] == ["conf-key-whitespace"]
    ib = eff.get("NCCL_IB_DISABLE")
    assert ib is not None and ib.shadowed == ()


def test_setting_to_dict_is_json_ready() -> None:
    conf = parse_conf("NCCL_DEBUG=WARN\n", "/etc/nccl.conf")
    (setting,) = resolve_settings({"NCCL_DEBUG": "INFO"}, [conf], defaults=False)
    assert setting.to_dict() == {
        "name": "NCCL_DEBUG", "value": "INFO", "source": "env", "path": None, "line": None,
        "note": "",
        "shadowed": [{"value": "WARN", "source": "file", "path": "/etc/nccl.conf", "line": 1}],
    }
