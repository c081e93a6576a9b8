"""The cluster shape from Slurm, a PyTorchJob, RunPod and SkyPilot environments (recorded in
tests/fixtures/schedulers/, see its README), merged under the user's flags; and the CLI's dry run
saying where each field came from. Host names never reach a real resolver here."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ddpkit.errors import ConfigError, ExitCode, UsageError
from ddpkit.launch.schedulers import Layout, detect, expand_hostlist, merge_flags

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "schedulers"
HOSTS = {"gpu-node07": "10.1.0.7", "gpu-node01": "10.1.0.11"}


def env_of(name: str) -> dict[str, str]:
    return dict(json.loads((FIXTURES / f"{name}.json").read_text()))


def fake_resolve(name: str) -> str:
    if name not in HOSTS:
        raise OSError(f"unknown host {name}")
    return HOSTS[name]


def test_slurm_gives_every_field_and_names_its_source() -> None:
    layout = detect(env_of("slurm_node1"), resolve=fake_resolve)
    assert layout is not None and layout.scheduler == "Slurm"
    assert (layout.nnodes, layout.node_rank, layout.master_addr, layout.nproc_per_node) == (
        4, 1, "10.1.0.7", "8")
    assert layout.sources["master_addr"].startswith("first host of SLURM_JOB_NODELIST (gpu-node07")
    assert layout.sources["nproc_per_node"] == "SLURM_GPUS_ON_NODE"
    assert any("SLURM_LAUNCH_NODE_IPADDR (10.1.0.5)" in note for note in layout.notes)


def test_slurm_prefers_scontrol_when_it_answers() -> None:
    seen: list[str] = []

    def scontrol(listed: str) -> list[str]:
        seen.append(listed)
        return ["gpu-node01", "gpu-node07"]

    layout = detect(env_of("slurm_node1"), resolve=fake_resolve, hostnames=scontrol)
    assert layout is not None and layout.master_addr == "10.1.0.11"
    assert seen == ["gpu-node[07-08,10],gpu-node12"] and "scontrol" in layout.sources["master_addr"]


def test_slurm_with_two_tasks_per_node_is_refused() -> None:
    with pytest.raises(UsageError) as caught:
        detect(env_of("slurm_two_tasks_per_node"), resolve=fake_resolve)
    assert caught.value.error_id == "slurm-tasks-per-node"
    assert "--ntasks-per-node=1" in caught.value.hint


def test_slurm_master_that_does_not_resolve_says_so() -> None:
    env = env_of("slurm_node1") | {"SLURM_JOB_NODELIST": "other[1-2]"}
    with pytest.raises(ConfigError) as caught:
        detect(env, resolve=fake_resolve)
    assert caught.value.error_id == "master-unresolvable" and "other1" in caught.value.message


@pytest.mark.parametrize(("listed", "hosts"), [
    ("node[01-04,07]", ["node01", "node02", "node03", "node04", "node07"]),
    ("gpu-a,gpu-b", ["gpu-a", "gpu-b"]),
    ("n[8-10]", ["n8", "n9", "n10"]),
    ("n[08-10]", ["n08", "n09", "n10"]),
    ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
    ("a[1],b[2-3],c", ["a1", "b2", "b3", "c"]),
])
def test_compressed_host_lists(listed: str, hosts: list[str]) -> None:
    assert expand_hostlist(listed) == hosts


@pytest.mark.parametrize("listed", ["node[1-", "node]1[", "node[a-b]", "node[5-2]", "",
                                    "n[0-99999999]"])
def test_bad_host_lists_are_refused_quickly(listed: str) -> None:
    with pytest.raises(ConfigError) as caught:
        expand_hostlist(listed)
    assert caught.value.error_id == "bad-hostlist"


def test_pytorchjob_reads_pet_variables() -> None:
    layout = detect(env_of("pytorchjob_worker1"), resolve=fake_resolve)
    assert layout is not None and layout.scheduler == "PyTorchJob"
    assert layout.fields() == {"nnodes": 3, "node_rank": 2, "master_addr": "10.244.1.17",
                               "master_port": 23456, "nproc_per_node": "4"}
    assert layout.notes == ()


def test_pytorchjob_world_size_counting_pods_is_named() -> None:
    layout = detect(env_of("pytorchjob_world_size_pods"), resolve=fake_resolve)
    assert layout is not None and (layout.nnodes, layout.node_rank) == (2, 1)
    assert any("counts pods" in note for note in layout.notes)


def test_runpod_and_skypilot() -> None:
    runpod = detect(env_of("runpod_node1"), resolve=fake_resolve)
    assert runpod is not None and runpod.scheduler == "RunPod"
    assert runpod.fields() == {"nnodes": 2, "node_rank": 1, "master_addr": "10.65.0.2",
                               "nproc_per_node": "8"}
    sky = detect(env_of("skypilot_node2"), resolve=fake_resolve)
    assert sky is not None and sky.scheduler == "SkyPilot"
    assert sky.fields() == {"nnodes": 3, "node_rank": 2, "master_addr": "172.31.5.10",
                            "nproc_per_node": "4"}


def test_no_scheduler_no_layout() -> None:
    assert detect({"HOME": "/root", "WORLD_SIZE": "4"}, resolve=fake_resolve) is None


@pytest.mark.parametrize("env", [
    {"PRIMARY_ADDR": "10.65.0.2", "NUM_NODES": "two", "NODE_RANK": "0"},
    {"MASTER_ADDR": "10.0.0.2", "PET_NNODES": "1:4"},
    {"MASTER_ADDR": "bad addr!", "WORLD_SIZE": "2"},
])
def test_broken_scheduler_variables_are_clear_errors(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as caught:
        detect(env, resolve=fake_resolve)
    assert caught.value.error_id == "bad-scheduler-env"


def test_flags_agreeing_or_choosing_stay_and_contradicting_ones_are_refused() -> None:
    layout = Layout("Slurm", 4, 1, "10.1.0.7", None, "8", {"nnodes": "SLURM_NNODES"})
    assert merge_flags(layout, {"nnodes": 4, "nproc_per_node": "4", "master_port": 29600}) == {
        "nnodes": 4, "node_rank": 1, "master_addr": "10.1.0.7", "nproc_per_node": "4",
        "master_port": 29600}
    with pytest.raises(UsageError) as caught:
        merge_flags(layout, {"nnodes": 2})
    assert caught.value.error_id == "scheduler-conflict"
    assert "--nnodes 2 contradicts the Slurm allocation, which gives 4 (SLURM_NNODES)" in \
        caught.value.message


RunCli = Callable[..., Any]


def test_dry_run_under_a_pytorchjob_shows_the_cluster_and_its_sources(
        run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key, value in env_of("pytorchjob_worker1").items():
        monkeypatch.setenv(key, value)
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    result = run_cli("launch", "--dry-run", "--json", str(script))
    assert result.code == ExitCode.OK, result.err
    plan = json.loads(result.out)
    assert (plan["nnodes"], plan["node_rank"], plan["master"]) == (3, 2, "10.244.1.17:23456")
    assert plan["cluster_sources"] == {
        "nnodes": "PyTorchJob: PET_NNODES", "node_rank": "PyTorchJob: PET_NODE_RANK",
        "master_addr": "PyTorchJob: MASTER_ADDR", "master_port": "PyTorchJob: MASTER_PORT",
        "nproc_per_node": "PyTorchJob: PET_NPROC_PER_NODE"}
    text = run_cli("launch", "--dry-run", str(script))
    assert "cluster from the environment:" in text.err + text.out
    assert "--nnodes 3  (PyTorchJob: PET_NNODES)" in text.err + text.out


def test_dry_run_under_slurm_with_a_conflicting_flag_fails_clearly(
        run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env = env_of("slurm_node1") | {"SLURM_JOB_NODELIST": "10.1.0.7,10.1.0.8,10.1.0.9,10.1.0.10"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    ok = run_cli("launch", "--dry-run", "--json", str(script))
    assert ok.code == ExitCode.OK, ok.err
    plan = json.loads(ok.out)
    assert (plan["nnodes"], plan["node_rank"], plan["master"]) == (4, 1, "10.1.0.7:29500")
    assert plan["cluster_sources"]["master_port"] == "default"
    bad = run_cli("launch", "--dry-run", "--node-rank", "3", str(script))
    assert bad.code == ExitCode.USAGE and "error [scheduler-conflict]" in bad.err


# --- recorded under a real Slurm 22.05 on the sim (benchmarks/slurm_sim.py --record) -------------

SIM_HOSTS = {"slm0": "10.213.77.2", "slm1": "10.213.77.3"}  # the sim nodes' hosts files


def test_real_slurm_env_recorded_on_the_sim_gives_the_layout() -> None:
    env = env_of("slurm_real_sim_node1")
    layout = detect(env, resolve=lambda name: SIM_HOSTS[name])
    assert layout is not None and layout.scheduler == "Slurm"
    assert (layout.nnodes, layout.node_rank, layout.master_addr, layout.master_port,
            layout.nproc_per_node) == (2, 1, "10.213.77.2", None, "1")
    assert layout.sources == {
        "nnodes": "SLURM_NNODES", "node_rank": "SLURM_NODEID",
        "master_addr": "first host of SLURM_JOB_NODELIST (slm0, from its host list), resolved",
        "nproc_per_node": "SLURM_NTASKS_PER_NODE"}
    # srun ran on the host, which is on the nodes' network but is not one of them
    assert layout.notes == ("SLURM_LAUNCH_NODE_IPADDR (10.213.77.1) is the host that ran srun, "
                            "not a node of the job: it is not used as the master",)
    with pytest.raises(UsageError) as caught:  # two tasks per node would start the job twice
        detect(env | {"SLURM_STEP_TASKS_PER_NODE": "2(x2)"}, resolve=lambda name: SIM_HOSTS[name])
    assert caught.value.error_id == "slurm-tasks-per-node"


def test_dry_run_with_the_real_slurm_env_names_slurm_as_the_source(
        run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ddpkit.cli.node import launch_options

    asked: list[str] = []

    def scontrol(listed: str, env: object) -> list[str]:
        asked.append(listed)
        return ["slm0", "slm1"]  # what the real scontrol answered for slm[0-1]

    monkeypatch.setattr(launch_options, "_scontrol_hostnames", scontrol)
    monkeypatch.setattr(launch_options, "_resolve_host", lambda name: SIM_HOSTS[name])
    for key, value in env_of("slurm_real_sim_node1").items():
        monkeypatch.setenv(key, value)
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    result = run_cli("launch", "--dry-run", "--json", str(script))
    assert result.code == ExitCode.OK, result.err
    plan = json.loads(result.out)
    assert (plan["nnodes"], plan["node_rank"], plan["master"]) == (2, 1, "10.213.77.2:29500")
    assert plan["cluster_sources"] == {
        "nnodes": "Slurm: SLURM_NNODES", "node_rank": "Slurm: SLURM_NODEID",
        "master_addr": "Slurm: first host of SLURM_JOB_NODELIST (slm0, from scontrol show "
                       "hostnames), resolved",
        "master_port": "default", "nproc_per_node": "Slurm: SLURM_NTASKS_PER_NODE"}
    assert asked == ["slm[0-1]"]
    text = run_cli("launch", "--dry-run", str(script))
    assert "--nnodes 2  (Slurm: SLURM_NNODES)" in text.err + text.out


def test_scontrol_runs_only_where_it_has_a_config_to_read(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Slurm 22.05's scontrol retries a missing SLURM_CONF for 60 s and, with no config at all,
    asks DNS for the controller: neither may happen just to expand a host list."""
    import shutil
    import subprocess

    from ddpkit.cli.node import launch_options

    ran: list[list[str]] = []

    def fake_run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        ran.append(argv)
        return subprocess.CompletedProcess(argv, 0, "slm0\nslm1\n", "")

    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: "/usr/bin/scontrol")
    monkeypatch.setattr(subprocess, "run", fake_run)
    missing = str(tmp_path / "absent.conf")
    assert launch_options._scontrol_hostnames("slm[0-1]", {"SLURM_CONF": missing}) is None
    assert launch_options._scontrol_hostnames("slm[0-1]", {}, default_conf=missing) is None
    assert ran == []
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    assert launch_options._scontrol_hostnames("slm[0-1]", {"SLURM_CONF": str(conf)}) == [
        "slm0", "slm1"]
    assert ran == [["/usr/bin/scontrol", "show", "hostnames", "slm[0-1]"]]
