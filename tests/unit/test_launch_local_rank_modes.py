"""The local-rank decision in every way of starting a job: per node (the plan and the commands it
prints for the other nodes), --hosts (every node decides from its own copy; an explicit mode
travels), join tokens (the job carries the mode), and `ddpkit test` (never affected)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ddpkit.cli.commands.join import job_command, node_args
from ddpkit.launch.join.sides import JoinJob

GUIDE = "import argparse\np = argparse.ArgumentParser()\np.add_argument('--local_rank', type=int)\n"


def _script(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ddp.py").write_text(GUIDE)


def test_per_node_plan_shows_the_decision_everywhere(run_cli, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _script(tmp_path, monkeypatch)
    doc = run_cli("launch", "--dry-run", "--json", "--nproc_per_node=2", "ddp.py", "--lr", "1").json()
    assert doc["argv"][-4:] == ["ddp.py", "--local_rank=${local_rank}", "--lr", "1"]
    assert doc["local_rank_arg"] == {
        "mode": "auto", "flag": "--local_rank", "file": "ddp.py", "line": 3, "warning": None,
        "reason": "ddp.py:3 declares add_argument('--local_rank')"}
    text = run_cli("launch", "--dry-run", "ddp.py")
    assert "local-rank argument: --local_rank=<local rank> (ddp.py:3 declares" in text.out


def test_module_entry_is_read_from_its_file(run_cli, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _script(tmp_path, monkeypatch)
    doc = run_cli("launch", "--dry-run", "--json", "-m", "ddp").json()
    assert doc["argv"][-3:] == ["-m", "ddp", "--local_rank=${local_rank}"]
    assert doc["local_rank_arg"]["file"] == str(tmp_path / "ddp.py")


def test_ddpkit_test_is_unaffected(run_cli, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _script(tmp_path, monkeypatch)
    doc = run_cli("test", "--dry-run", "--json").json()
    assert not any("local_rank" in a or "local-rank" in a for a in doc["argv"])
    assert doc["local_rank_arg"]["mode"] == "" and doc["local_rank_arg"]["flag"] is None
    assert "local-rank argument" not in run_cli("test", "--dry-run").out


def test_hosts_mode_lets_each_node_decide_and_carries_an_explicit_mode(run_cli, tmp_path,  # type: ignore[no-untyped-def]
                                                                         monkeypatch) -> None:
    _script(tmp_path, monkeypatch)
    auto = run_cli("launch", "--hosts", "localhost,127.0.0.1", "--dry-run", "--json",
                   "--monitor-interval=0.5", "ddp.py").json()
    for node in auto["nodes"]:
        tail = node["node_argv"][node["node_argv"].index("--json") + 1:]
        assert tail == ["--monitor-interval=0.5", "ddp.py"]  # auto: decided on the node itself
    explicit = run_cli("launch", "--hosts", "localhost,127.0.0.1", "--dry-run", "--json",
                       "--local_rank_arg", "dash", "--use-env", "ddp.py")
    assert explicit.code != 0 and "error [local-rank-arg-conflict]" in explicit.err
    dash = run_cli("launch", "--hosts", "localhost,127.0.0.1", "--dry-run", "--json",
                   "--local-rank-arg", "dash", "ddp.py").json()
    for node in dash["nodes"]:
        assert "--local-rank-arg" in node["node_argv"]
    refused = run_cli("launch", "--hosts", "localhost,127.0.0.1", "--dry-run",
                      "--local-addr=127.0.0.1", "ddp.py")
    assert "error [local-addr-per-node]" in refused.err


def test_join_job_carries_the_mode_and_the_worker_decides_from_its_copy(run_cli, tmp_path,  # type: ignore[no-untyped-def]
                                                                         monkeypatch) -> None:
    _script(tmp_path, monkeypatch)
    doc = run_cli("launch", "--nnodes", "2", "--dry-run", "--json", "--start-method=fork",
                  "ddp.py").json()
    spec = JoinJob.from_dict({**doc, "master_addr": doc["address"]})
    assert "--start-method=fork" in spec.job.entry  # torch's flags travel with the job
    args = argparse.Namespace(ifname=None, connect_timeout=5.0, run_dir=None, show_output=False)
    config, _ = job_command("launch").node_config(node_args(spec, 1, args))
    assert config.node_rank == 1 and config.local_rank_arg == "auto"  # decided on the node
    assert config.torchrun_options == (("--start-method", "fork"),)
