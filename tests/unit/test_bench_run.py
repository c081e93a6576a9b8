"""`ddpkit bench` as data: argument parsing, the job list every node derives, launch configs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ddpkit.bench.run import (
    DEFAULT_SETTINGS,
    MAX_SOCKET_PRODUCT,
    MAX_SOCKET_THREADS,
    QUICK_SOCKET_GRID,
    SOCKET_GRID,
    BenchOptions,
    job_config,
    normalise_settings,
    peer_argv,
    pg_timeout,
    plan_jobs,
)
from ddpkit.cli.command_table import build_parser
from ddpkit.cli.commands.bench import options_from_args
from ddpkit.errors import DdpkitError, UsageError
from ddpkit.launch.config import LaunchConfig


def parse(*argv: str) -> BenchOptions:
    parser, _ = build_parser("bench")
    return options_from_args(parser.parse_args(list(argv)))


def test_defaults_measure_tcp_collectives_and_scaling_of_a_25m_model() -> None:
    o = parse()
    assert (o.tcp, o.collectives, o.scaling, o.socket_sweep) == (True, True, True, False)
    assert o.params == 25_000_000 and o.batch == 64
    assert o.settings == DEFAULT_SETTINGS
    assert (o.min_bytes, o.max_bytes, o.step_factor) == (1024, 64 << 20, 2)


def test_nccl_tests_flags_and_units() -> None:
    o = parse("-b", "1K", "-e", "256M", "-f", "4", "-w", "3", "-n", "7", "--params", "7.5M",
              "--tcp-max-bytes", "64MiB", "--tcp-seconds", "500ms", "--setting-timeout", "2min",
              "--ops", "all_reduce,broadcast", "--tcp-streams", "8,1,4,4")
    assert (o.min_bytes, o.max_bytes, o.step_factor, o.warmup_iters, o.iters) == (
        1024, 256 << 20, 4, 3, 7)
    assert o.params == 7_500_000 and o.tcp_max_bytes == 64 << 20
    assert o.tcp_seconds == pytest.approx(0.5) and o.setting_timeout == 120.0
    assert o.ops == ("all_reduce", "broadcast") and o.tcp_streams == (1, 4, 8)


def test_torchrun_style_underscore_spellings_work() -> None:
    o = parse("--setting_timeout", "60", "--tcp_seconds", "1", "--powersgd_warmup", "5")
    assert (o.setting_timeout, o.tcp_seconds, o.powersgd_warmup) == (60.0, 1.0, 5)


def test_phase_flags_select_only_those_phases() -> None:
    o = parse("--tcp")
    assert (o.tcp, o.collectives, o.scaling) == (True, False, False)
    o = parse("--scaling", "--socket-sweep")
    assert (o.tcp, o.collectives, o.scaling, o.socket_sweep) == (False, False, True, True)


def test_quick_shrinks_everything_but_explicit_flags_win() -> None:
    quick = parse("--quick")
    assert quick.quick and quick.params < 25_000_000 and quick.steps < 10
    assert quick.max_bytes <= 16 << 20 and quick.ops == ("all_reduce",)
    assert parse("--quick", "--params", "1M", "-e", "1M").params == 1_000_000
    assert parse("--quick", "--params", "1M", "-e", "1M").max_bytes == 1 << 20


@pytest.mark.parametrize("argv, error_id", [
    (("-b", "1KB"), "bad-size"),  # SI: refused in a sweep, as in nccl-tests' own parser
    (("-b", "1M", "-e", "1K"), "bad-bench-option"),
    (("--ops", "all_reduce,gather"), "bad-bench-option"),
    (("--settings", "none,zip"), "bad-setting"),
    (("--params", "lots"), "bad-count"),
    (("--tcp-seconds", "0"), "bad-duration"),
    (("--tcp-streams", "1,x"), "bad-bench-option"),
    (("--tcp-streams", "100"), "bad-bench-option"),
    (("--efficiency-threshold", "1.5"), "bad-bench-option"),
    (("--setting-timeout", "1s"), "bad-bench-option"),
])
def test_bad_values_are_refused_before_anything_runs(argv: tuple[str, ...], error_id: str) -> None:
    with pytest.raises(DdpkitError) as caught:
        parse(*argv)
    assert caught.value.error_id == error_id
    assert caught.value.hint


def test_settings_are_normalised_with_plain_ddp_first_once() -> None:
    assert normalise_settings(("BF16", "accumulate:4+bf16", "none", "powersgd:2")) == (
        "none", "bf16", "bf16+accumulate:4", "powersgd:2")


def _jobs(o: BenchOptions, nnodes: int = 2, backend: str = "gloo") -> tuple:  # type: ignore[type-arg]
    return plan_jobs(o, "/r/results", nnodes=nnodes, backend=backend)


def test_jobs_are_one_net_job_then_one_per_setting() -> None:
    jobs, notes = _jobs(BenchOptions(settings=("bf16", "powersgd:4")))
    assert [j.name for j in jobs] == ["net", "scaling:none", "scaling:bf16", "scaling:powersgd:4"]
    assert notes == ()
    net = jobs[0]
    assert net.module == "ddpkit.workers.collectives"
    args = list(net.args)
    assert args[args.index("--out") + 1] == "/r/results/collectives.json"
    assert args[args.index("--tcp-out") + 1] == "/r/results/tcp.json"
    assert args[args.index("--tcp-streams") + 1] == "1,4"
    psgd = jobs[3]
    assert psgd.module == "ddpkit.workers.scaling" and psgd.setting == "powersgd:4"
    assert list(psgd.args)[list(psgd.args).index("--out") + 1] == "/r/results/scaling-powersgd-4.json"
    assert psgd.output == "scaling-powersgd-4.json"
    # the ranks give up on their own before the job is killed
    timeout = float(list(psgd.args)[list(psgd.args).index("--timeout") + 1])
    assert timeout == pg_timeout(psgd.timeout_s) < psgd.timeout_s


def test_tcp_without_collectives_runs_the_baseline_worker_alone() -> None:
    jobs, _ = _jobs(BenchOptions(collectives=False, scaling=False))
    assert [j.module for j in jobs] == ["ddpkit.workers.tcp_baseline"]
    assert jobs[0].tcp_output == "tcp.json"


def test_one_node_skips_tcp_with_a_note_and_keeps_the_rest() -> None:
    jobs, notes = _jobs(BenchOptions(settings=("none",)), nnodes=1)
    assert [j.name for j in jobs] == ["net", "scaling:none"]
    assert "--tcp-out" not in jobs[0].args
    assert any("TCP" in n for n in notes) and any("1-node" in n for n in notes)


def test_socket_sweep_needs_nccl_and_says_so_on_gloo() -> None:
    jobs, notes = _jobs(BenchOptions(collectives=False, tcp=False, scaling=False,
                                     socket_sweep=True), backend="gloo")
    assert jobs == ()
    assert len(notes) == 1 and "NCCL" in notes[0] and "gloo" in notes[0]
    jobs, notes = _jobs(BenchOptions(collectives=False, tcp=False, scaling=False,
                                     socket_sweep=True), nnodes=1, backend="nccl")
    assert jobs == () and "2+ nodes" in notes[0]


def test_socket_sweep_grid_respects_nccl_limits_and_starts_with_the_default() -> None:
    for grid in (SOCKET_GRID, QUICK_SOCKET_GRID):
        assert all(t * s <= MAX_SOCKET_PRODUCT and 1 <= t <= MAX_SOCKET_THREADS for t, s in grid)
    jobs, _ = _jobs(BenchOptions(collectives=False, tcp=False, scaling=False, socket_sweep=True),
                    backend="nccl")
    assert jobs[0].name == "socket:default" and jobs[0].env == ()
    assert len(jobs) == 1 + len(SOCKET_GRID)
    four_by_eight = next(j for j in jobs if j.socket == (4, 8))
    assert dict(four_by_eight.env) == {"NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "8"}
    assert "--backend" in four_by_eight.args and "nccl" in four_by_eight.args


def _base(**changes: object) -> LaunchConfig:
    config = LaunchConfig(nnodes=2, node_rank=1, master_addr="10.0.0.2", entry="x",
                          master_port=29500, connect_timeout=60.0, rdzv_timeout=600,
                          extra_env=(("OMP_NUM_THREADS", "1"),))
    return replace(config, **changes)  # type: ignore[arg-type]


def test_each_job_gets_its_own_port_run_dir_and_waits_bounded_by_the_previous_job() -> None:
    jobs, _ = _jobs(BenchOptions(settings=("bf16",), setting_timeout=100.0))
    first = job_config(_base(), jobs[0], 0, None, "/runs/x")
    assert first.master_port == 29500 and first.connect_timeout == 60.0
    assert first.rdzv_timeout == 600  # the first meeting is paced by people starting nodes
    assert first.run_dir == "/runs/x/00-net" and first.entry == "ddpkit.workers.collectives"
    assert first.job_timeout == jobs[0].timeout_s and first.is_module
    third = job_config(_base(), jobs[2], 2, jobs[1], "/runs/x")
    assert third.master_port == 29502 and third.run_dir == "/runs/x/02-scaling-bf16"
    # a peer may still be waiting out the previous job's limit: wait that long, no longer
    assert third.connect_timeout == 130.0 and third.rdzv_timeout == 160
    assert third.extra_env == (("OMP_NUM_THREADS", "1"),)


def test_a_user_job_timeout_applies_to_every_job() -> None:
    jobs, _ = _jobs(BenchOptions(settings=("none",)))
    config = job_config(_base(job_timeout=45.0), jobs[1], 1, jobs[0], "/r")
    assert config.job_timeout == 45.0 and config.connect_timeout == 75.0


def test_ports_beyond_65535_are_refused() -> None:
    jobs, _ = _jobs(BenchOptions())
    with pytest.raises(UsageError) as caught:
        job_config(_base(master_port=65534), jobs[3], 3, jobs[2], "/r")
    assert caught.value.error_id == "bad-bench-option"


def test_socket_jobs_carry_their_nccl_env_after_the_users() -> None:
    jobs, _ = _jobs(BenchOptions(collectives=False, tcp=False, scaling=False, socket_sweep=True),
                    backend="nccl")
    config = job_config(_base(), jobs[1], 1, jobs[0], "/r")
    assert config.extra_env[0] == ("OMP_NUM_THREADS", "1")
    assert jobs[1].socket is not None
    assert dict(config.extra_env)["NCCL_SOCKET_NTHREADS"] == str(jobs[1].socket[0])


@pytest.mark.parametrize("argv", [(), ("--quick",), ("--tcp", "--scaling", "--settings",
                                                        "fp16,accumulate:2", "-e", "1M"),
                                  ("--socket-sweep", "--backend", "nccl", "--tcp-seconds", "1.5"),
                                  ("--quick", "-n", "5", "--params", "25M"), ("--collectives",),
                                  ("--quick", "--collectives", "--tcp", "--scaling")])
def test_peer_command_makes_other_nodes_plan_the_same_jobs(argv: tuple[str, ...]) -> None:
    mine = parse(*argv)
    command = peer_argv(mine)
    assert command[0] == "bench"
    theirs = parse(*command[1:])
    assert theirs == mine
    assert _jobs(theirs, backend="nccl") == _jobs(mine, backend="nccl")


@pytest.mark.parametrize(("argv", "expected"), [
    ((), ("bench",)), (("--quick",), ("bench", "--quick")),
    (("--quick", "--iters", "5"), ("bench", "--quick", "-n", "5")),
    (("--tcp", "--settings", "none,bf16"), ("bench", "--tcp", "--settings", "none,bf16"))])
def test_peer_command_names_only_what_differs_from_the_defaults(
        argv: tuple[str, ...], expected: tuple[str, ...]) -> None:
    # `bench --quick` used to echo every default: a 460-column line to type on every node
    assert peer_argv(parse(*argv)) == expected


def test_dry_run_prints_the_job_list_and_starts_nothing(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("bench", "--dry-run", "--json", "--quick", "--run-dir", str(tmp_path / "r"))
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["schema"] == "ddpkit.bench-plan/1"
    names = [j["name"] for j in doc["jobs"]]
    assert names[0] == "net" and names[1] == "scaling:none"
    assert [j["port"] for j in doc["jobs"]] == list(range(29500, 29500 + len(names)))
    assert any("TCP" in n for n in doc["notes"])
    assert not (tmp_path / "r").exists()


def test_bad_flag_values_exit_with_usage_and_the_error_id(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("bench", "--settings", "powersgd:0")
    assert result.code == 2
    assert "bad-setting" in result.err


def test_a_worker_without_master_addr_is_refused(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("bench", "--nnodes", "2", "--node-rank", "1", "--dry-run")
    assert result.code == 2 and "missing-master-addr" in result.err


def test_nnodes_without_master_addr_is_token_mode(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("bench", "--nnodes", "2", "--ifname", "lo", "--quick", "--settings", "none",
                     "--dry-run", "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["schema"] == "ddpkit.join-plan/2"
    assert doc["node1_argv"][:2] == ["ddpkit", "bench"]
    assert doc["node1_argv"][-3:] == ["--settings", "none", "--quick"]


def test_bench_flags_travel_to_every_node_unchanged() -> None:
    """Every option of `ddpkit bench` either travels in the job's flags, is a launch/cluster
    option the job carries itself, or is node 0's own output: read back, the flags give the same
    bench (the drift test for bench over --hosts and join tokens)."""
    from ddpkit.cli.command_table import build_parser
    from ddpkit.cli.commands.bench import options_from_args
    from ddpkit.cli.job import bench_job

    parser, _ = build_parser("bench")
    given = parser.parse_args(["--quick", "-b", "4K", "-e", "1M", "-f", "4", "-n", "3", "--ops",
                               "all_reduce", "--tcp-seconds", "1s", "--tcp-streams", "1,2",
                               "--settings", "none,bf16", "--efficiency-threshold", "0.6",
                               "--backend", "gloo", "--collectives", "--scaling", "--params",
                               "1M", "--setting-timeout", "60s", "--net-timeout", "100s"])
    again = parser.parse_args(bench_job.bench_flags(given))
    assert options_from_args(again) == options_from_args(given)
    launch_parser, _ = build_parser("launch")
    carried = {a.dest for a in launch_parser._actions}
    known = set(bench_job.VALUE_FLAGS) | set(bench_job.SWITCHES) | set(bench_job.NODE_OWN)
    missing = {a.dest for a in parser._actions} - known - carried - {"help", "json"}
    assert missing == set()
