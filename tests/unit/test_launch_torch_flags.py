"""Every option of torch's own launcher parsers (torch.distributed.run and torch.distributed.launch,
read from torch at test time) is accepted by `ddpkit launch --dry-run` in both spellings, and none
is silently dropped: each shows up in the torchrun command or in what ddpkit made of it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from ddpkit.launch.torchrun.command import PASSED_ON

pytest.importorskip("torch")


def _torch_parsers() -> list[argparse.ArgumentParser]:
    import torch.distributed.launch as launch
    import torch.distributed.run as run

    parsers = [run.get_args_parser()]
    captured: list[argparse.ArgumentParser] = []
    original = launch.get_args_parser

    def capture() -> argparse.ArgumentParser:
        parser = original()
        captured.append(parser)
        return parser

    launch.get_args_parser = capture  # torch.distributed.launch adds --use-env to run's parser
    try:
        launch.parse_args(["x.py"])
    finally:
        launch.get_args_parser = original
    return parsers + captured


def _actions() -> list[argparse.Action]:
    seen: dict[tuple[str, ...], argparse.Action] = {}
    for parser in _torch_parsers():
        for action in parser._actions:
            if action.option_strings:
                seen[tuple(action.option_strings)] = action
    return list(seen.values())


ACTIONS = _actions()
# Values that work with ddpkit's choices (one node, static rendezvous on loopback).
VALUES = {"--nnodes": "1", "--nproc-per-node": "2", "--rdzv-backend": "static",
          "--rdzv-endpoint": "127.0.0.1:29581", "--master-addr": "127.0.0.1",
          "--master-port": "29582", "--node-rank": "0", "--local-addr": "127.0.0.1",
          "--rdzv-conf": "join_timeout=30", "--redirects": "1", "--tee": "2",
          "--local-ranks-filter": "0", "--max-restarts": "2", "--monitor-interval": "0.5",
          "--shutdown-timeout": "7", "--signals-to-handle": "SIGTERM,SIGUSR1"}


def _canonical(action: argparse.Action) -> str:
    longs = [o for o in action.option_strings if o.startswith("--")]
    kebab = [o for o in longs if "_" not in o]
    return (kebab or longs or action.option_strings)[0]


def _value(action: argparse.Action) -> str | None:
    if action.nargs == 0:
        return None
    name = _canonical(action)
    if name in VALUES:
        return VALUES[name]
    if action.choices:
        return str(list(action.choices)[-1])
    if action.type is int:
        return "3"
    if action.type is float:
        return "0.25"
    return "ddpkit-test"


def _spellings(action: argparse.Action) -> list[str]:
    names = set(action.option_strings)
    for option in action.option_strings:
        if option.startswith("--"):
            names.add("--" + option[2:].replace("-", "_"))
            names.add("--" + option[2:].replace("_", "-"))
    return sorted(names)


CASES = [(action, spelling) for action in ACTIONS for spelling in _spellings(action)]


def test_the_list_comes_from_torch_and_covers_what_ddpkit_passes_on() -> None:
    names = {_canonical(a) for a in ACTIONS}
    assert {"--nproc-per-node", "--rdzv-backend", "--standalone", "--use-env", "--no-python",
            "--run-path", "--local-ranks-filter", "--tee", "--max-restarts"} <= names
    assert {flag.name for flag in PASSED_ON} <= names  # nothing ddpkit passes on is made up


def _reflected(action: argparse.Action, value: str | None, doc: dict[str, Any]) -> bool:
    """The option is visible in the plan: in torchrun's argv, or in what ddpkit made of it."""
    name, argv = _canonical(action), doc["argv"]
    if name in ("-h", "--help"):
        return True
    if name == "--module":
        return "-m" in argv
    if name == "--use-env":
        return "--use-env" in doc["local_rank_arg"]["reason"]
    if name == "--rdzv-endpoint":
        return "--master-addr=127.0.0.1" in argv and "--master-port=29581" in argv
    if name == "--rdzv-conf":
        return any(a.startswith("--rdzv-conf=") and f"{value}" in a for a in argv)
    return (name in argv) if value is None else (f"{name}={value}" in argv)


@pytest.mark.parametrize(("action", "spelling"), CASES,
                         ids=[f"{spelling}" for _, spelling in CASES])
def test_every_torch_launcher_option_is_accepted(run_cli, tmp_path: Path, monkeypatch,  # type: ignore[no-untyped-def]
                                                 action: argparse.Action, spelling: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("print('hi')\n")
    value = _value(action)
    if _canonical(action) == "--log-dir":
        value = str(tmp_path / "logs")
    given = [spelling] if value is None else [f"{spelling}={value}" if spelling.startswith("--")
                                              else spelling, *([] if spelling.startswith("--")
                                                               else [value])]
    if _canonical(action) == "--module":
        (tmp_path / "x_mod.py").write_text("print('hi')\n")
        result = run_cli("launch", "--dry-run", "--json", *given, "x_mod")
    else:
        result = run_cli("launch", "--dry-run", "--json", *given, "x.py")
    assert result.code == 0, (given, result.err)
    if _canonical(action) in ("-h", "--help"):
        assert "usage: ddpkit launch" in result.out
        return
    doc = result.json()
    assert _reflected(action, value, doc), (given, doc["argv"])


@pytest.mark.parametrize(("argv", "error_id"), [
    (["--rdzv-backend=etcd-v2"], "rdzv-backend-conflict"),
    (["--rdzv_backend", "etcd"], "rdzv-backend-conflict"),
    (["--standalone", "--nnodes=2", "--master-addr=127.0.0.1"], "standalone-multi-node"),
    (["--rdzv-endpoint=127.0.0.2:29500", "--master-addr=127.0.0.1"], "rdzv-endpoint-conflict"),
    (["--rdzv-endpoint=127.0.0.1:x"], "bad-rdzv-endpoint"),
    (["--no-python", "-m"], "entry-flags-conflict"),
    (["--use-env", "--local-rank-arg=dash"], "local-rank-arg-conflict"),
    (["--virtual-local-rank", "--local-rank-arg=underscore"], "virtual-local-rank-conflict"),
    (["--nnodes=1:4"], "bad-usage"),
])
def test_flags_that_cannot_work_are_refused_with_an_id(run_cli, tmp_path: Path, monkeypatch,  # type: ignore[no-untyped-def]
                                                       argv: list[str], error_id: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("print('hi')\n")
    result = run_cli("launch", "--dry-run", *argv, "x.py")
    assert result.code != 0
    assert f"error [{error_id}]" in result.err, result.err


def test_a_fixed_range_is_a_node_count(run_cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("print('hi')\n")
    result = run_cli("launch", "--dry-run", "--json", "--nnodes=1:1", "x.py")
    assert result.code == 0, result.err
    assert "--nnodes=1" in result.json()["argv"]


def test_passed_on_flags_reach_the_other_nodes_command(run_cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("print('hi')\n")
    result = run_cli("launch", "--dry-run", "--json", "--nnodes=2", "--master-addr=127.0.0.1",
                     "--monitor_interval=0.5", "--local-addr=127.0.0.1", "--local-rank-arg=dash",
                     "x.py", "--lr", "1")
    assert result.code == 0, result.err
    (peer,) = result.json()["peer_commands"]
    assert "--monitor-interval=0.5" in peer and "--local-rank-arg dash" in peer
    assert "--local-addr" not in peer  # one machine's address is not every machine's
    assert peer.endswith("x.py --lr 1")


def test_a_users_value_replaces_ddpkits_and_rdzv_conf_is_merged() -> None:
    from ddpkit.launch.config import LaunchConfig
    from ddpkit.launch.torchrun.command import torchrun_argv

    def argv(*options: tuple[str, str | None]) -> list[str]:
        config = LaunchConfig(nnodes=2, node_rank=1, master_addr="10.0.0.2", entry="t.py",
                              entry_args=("--x",), rdzv_timeout=90, torchrun_options=options)
        return torchrun_argv("py", config, local_addr="10.0.0.3", log_dir="/r/torchrun",
                             local_rank_arg="--local_rank=${local_rank}")

    plain = argv()
    assert {"--redirects=3", "--log-dir=/r/torchrun", "--local-addr=10.0.0.3",
            "--rdzv-conf=timeout=90"} <= set(plain)
    assert not [a for a in plain if a.startswith("--tee")]  # ddpkit follows the rank files
    redirected = argv(("--redirects", "1"))  # the user chose: torchrun's own tee shows the rest
    assert "--redirects=1" in redirected and "--tee=3" in redirected
    assert plain[-3:] == ["t.py", "--local_rank=${local_rank}", "--x"]
    mine = argv(("--tee", "0"), ("--log-dir", "/mine"), ("--local-addr", "10.0.0.9"),
                ("--rdzv-conf", "join_timeout=5"), ("--role", "trainer"), ("--standalone", None))
    assert "--tee=0" in mine and "--tee=3" not in mine
    assert "--log-dir=/mine" in mine and "--log-dir=/r/torchrun" not in mine
    assert "--local-addr=10.0.0.9" in mine and "--local-addr=10.0.0.3" not in mine
    assert "--rdzv-conf=timeout=90,join_timeout=5" in mine
    assert "--role=trainer" in mine and "--standalone" in mine
    assert [a for a in mine if a.startswith("--tee")] == ["--tee=0"]
    own_timeout = argv(("--rdzv-conf", "timeout=30"))
    assert [a for a in own_timeout if a.startswith("--rdzv-conf")] == ["--rdzv-conf=timeout=30"]


def test_a_flag_of_a_newer_torchrun_passes_on_without_a_change_to_ddpkit(  # type: ignore[no-untyped-def]
        run_cli, tmp_path: Path, monkeypatch) -> None:
    """A torch release with flags ddpkit has never heard of: they are read from its parser."""
    import torch.distributed.run as torch_run

    original = torch_run.get_args_parser

    def newer() -> argparse.ArgumentParser:
        parser = original()
        parser.add_argument("--ddpkit-never-heard-of", "--ddpkit_never_heard_of", default=None)
        parser.add_argument("--brand-new-switch", action="store_true")
        return parser

    monkeypatch.setattr(torch_run, "get_args_parser", newer)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("print('hi')\n")
    result = run_cli("launch", "--dry-run", "--json", "--ddpkit_never_heard_of", "7",
                     "--brand-new-switch", "--nnodes=2", "--master-addr=127.0.0.1", "x.py",
                     "--brand-new-switch", "--lr", "1")
    assert result.code == 0, result.err
    doc = result.json()
    ours = doc["argv"][:doc["argv"].index("x.py")]
    assert "--ddpkit-never-heard-of=7" in ours and "--brand-new-switch" in ours
    assert doc["argv"][doc["argv"].index("x.py"):] == ["x.py", "--brand-new-switch", "--lr", "1"]
    (peer,) = doc["peer_commands"]  # every node gets them, like the listed flags
    assert "--ddpkit-never-heard-of=7 --brand-new-switch" in peer
    # a joining node reads the master's job through the same parser (cli/commands/join.py)
    from ddpkit.cli.command_table import build_parser
    from ddpkit.cli.node.torch_options import resolve

    line = ["--nnodes=2", "--node-rank=1", "--master-addr=127.0.0.1",
            "--ddpkit-never-heard-of=7", "x.py"]
    parser, _module = build_parser("launch", argv=line)
    _args, options = resolve(parser.parse_args(line))
    assert ("--ddpkit-never-heard-of", "7") in options.torchrun_options
    # a flag no torchrun has is still refused, and names itself
    monkeypatch.setattr(torch_run, "get_args_parser", original)
    refused = run_cli("launch", "--dry-run", "--ddpkit-never-heard-of=7", "x.py")
    assert refused.code != 0 and "--ddpkit-never-heard-of" in refused.err


def test_torch_is_read_only_for_a_flag_nothing_else_knows(run_cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                          monkeypatch) -> None:
    import torch.distributed.run as torch_run

    reads: list[int] = []
    original = torch_run.get_args_parser

    def counted() -> argparse.ArgumentParser:
        reads.append(1)
        return original()

    monkeypatch.setattr(torch_run, "get_args_parser", counted)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("print('hi')\n")
    result = run_cli("launch", "--dry-run", "--json", "--monitor-interval", "1", "--standalone",
                     "x.py", "--new", "--lr=1")
    assert result.code == 0, result.err
    assert reads == []  # the script's own --new is its own
    assert run_cli("launch", "--dry-run", "--not-a-torchrun-flag", "x.py").code != 0
    assert reads == [1]
