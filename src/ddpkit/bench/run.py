"""`ddpkit bench` as data: its options, and the jobs every node runs, in the same order, one by one.

Every node derives the same job list from the same options (:func:`plan_jobs`), so the nodes meet
in each job without talking outside torch: job ``k`` rendezvouses on ``master_port + k``. One job
per scaling setting isolates a setting that hangs or crashes (PowerSGD on Gloo, say): its job times
out or fails, the setting is recorded as failed, and the next job starts clean. No torch here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import Any, Literal

from ddpkit.bench.formulas import sweep_sizes
from ddpkit.bench.planning.memory import Strategy
from ddpkit.bench.planning.model import parse_setting
from ddpkit.errors import UsageError
from ddpkit.i18n import _, _n
from ddpkit.launch.config import LaunchConfig
from ddpkit.net.ports import LARGEST_PORT

COLLECTIVES_MODULE = "ddpkit.workers.collectives"
TCP_MODULE = "ddpkit.workers.tcp_baseline"
SCALING_MODULE = "ddpkit.workers.scaling"
STRATEGIES_MODULE = "ddpkit.workers.strategies"
# The training strategies the bench can run beside plan's model of them (--strategies).
BENCH_STRATEGIES: tuple[Strategy, ...] = ("ddp", "fsdp", "hsdp")
# glibc returns every freed block over 64 KiB to the kernel at once, so a phase's peak resident
# memory follows its live tensors, not what an earlier phase left in the heap.
STRATEGY_ENV = (("MALLOC_MMAP_THRESHOLD_", "65536"),)
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
DEFAULT_SETTINGS = ("none", "bf16", "fp16", "powersgd:1", "powersgd:2", "powersgd:4",
                    "accumulate:4", "bf16+accumulate:4")
QUICK_SETTINGS = ("none", "bf16", "powersgd:1", "accumulate:4", "bf16+accumulate:4")
MAX_SOCKET_PRODUCT, MAX_SOCKET_THREADS = 64, 16  # NCCL's limits
SOCKET_GRID = tuple((t, s) for t in (1, 2, 4, 8, 16) for s in (1, 2, 4, 8, 16)
                    if t * s <= MAX_SOCKET_PRODUCT)
QUICK_SOCKET_GRID = ((2, 2), (4, 4), (8, 8), (4, 16), (16, 4))
RESULTS_DIR = "results"


@dataclass(frozen=True)
class BenchOptions:
    """What to measure; every node of a job must use the same (see :func:`peer_argv`)."""

    collectives: bool = True
    tcp: bool = True
    scaling: bool = True
    socket_sweep: bool = False
    min_bytes: int = 1024
    max_bytes: int = 64 << 20
    step_factor: int = 2
    warmup_iters: int = 2
    iters: int = 5
    ops: tuple[str, ...] = OPS
    tcp_seconds: float = 2.0
    tcp_streams: tuple[int, ...] = (1, 4)
    tcp_max_bytes: int = 1 << 30
    params: int = 25_000_000
    batch: int = 64
    steps: int = 10
    warmup_steps: int = 3
    powersgd_warmup: int = 2
    settings: tuple[str, ...] = DEFAULT_SETTINGS
    strategies: tuple[str, ...] = ()  # off unless asked: DDP / FSDP / HSDP steps (docs/bench.md)
    backend: str = "auto"
    setting_timeout: float = 300.0
    net_timeout: float = 900.0
    efficiency_threshold: float = 0.7
    quick: bool = False

    def __post_init__(self) -> None:
        check_options(self)


# --quick: what it changes from the defaults (explicit flags still win).
QUICK: dict[str, Any] = dict(
    min_bytes=64 << 10, max_bytes=16 << 20, step_factor=4, warmup_iters=1, iters=3,
    ops=("all_reduce",), tcp_seconds=1.0, params=4_000_000, batch=32, steps=6, warmup_steps=2,
    settings=QUICK_SETTINGS, setting_timeout=120.0, net_timeout=180.0)


def _bad(message: str, hint: str) -> UsageError:
    return UsageError("bad-bench-option", message, hint)


def check_options(o: BenchOptions) -> None:
    """UsageError ``bad-bench-option`` / ``bad-setting`` before anything starts."""
    if not (o.collectives or o.tcp or o.scaling or o.socket_sweep or o.strategies):
        raise _bad(_("nothing to measure"), _("give --collectives, --tcp, --scaling, "
                                              "--socket-sweep or --strategies"))
    unknown_strategies = sorted(set(o.strategies) - set(BENCH_STRATEGIES))
    if unknown_strategies:
        raise _bad(_n("unknown strategy: {names}", "unknown strategies: {names}",
                      len(unknown_strategies), names=", ".join(unknown_strategies)),
                   _("choose from {choices}", choices=",".join(BENCH_STRATEGIES)))
    try:
        sweep_sizes(o.min_bytes, o.max_bytes, o.step_factor)
    except ValueError as exc:
        raise _bad(_("collective sizes: {reason}", reason=str(exc)),
                   _("e.g. {example}", example="-b 1K -e 64M -f 2")) from None
    if o.warmup_iters < 0 or o.iters < 1:
        raise _bad(_("need -w >= 0 and -n >= 1"), _("e.g. {example}", example="-w 2 -n 5"))
    unknown = sorted(set(o.ops) - set(OPS))
    if unknown or not o.ops:
        raise _bad(_("unknown collective(s): {names}", names=", ".join(unknown) or _("(none)")),
                   _("choose from {choices}", choices=", ".join(OPS)))
    if not (0 < o.tcp_seconds <= 60) or not o.tcp_streams or min(o.tcp_streams) < 1 or \
            max(o.tcp_streams) > 64 or o.tcp_max_bytes < 1 << 20:
        raise _bad(_("TCP baseline: need 0 < --tcp-seconds <= 60, 1..64 streams and at least "
                     "1 MiB"), _("e.g. {example}", example="--tcp-seconds 2 --tcp-streams 1,4"))
    if o.params < 1000 or o.batch < 1 or o.steps < 1 or o.warmup_steps < 0 or o.powersgd_warmup < 2:
        raise _bad(_("scaling: need --params >= 1K, --batch >= 1, --steps >= 1, --warmup >= 0, "
                     "--powersgd-warmup >= 2"),
                   _("e.g. {example}", example="--params 25M --batch 64 --steps 10"))
    if not o.settings:
        raise _bad(_("no scaling settings given"),
                   _("e.g. {example}", example="--settings none,bf16,accumulate:4"))
    for text in o.settings:
        parse_setting(text)  # UsageError bad-setting
    if o.backend not in ("auto", "gloo", "nccl"):
        raise _bad(_("unknown backend {name!r}", name=o.backend), _("use auto, gloo or nccl"))
    if o.setting_timeout < 10 or o.net_timeout < 10:
        raise _bad(_("timeouts must be at least 10 s"),
                   _("e.g. {example}", example="--setting-timeout 300"))
    if not 0 < o.efficiency_threshold < 1:
        raise _bad(_("efficiency threshold {threshold} is outside (0, 1)",
                     threshold=o.efficiency_threshold),
                   _("e.g. {example}", example="--efficiency-threshold 0.7"))


def normalise_settings(texts: tuple[str, ...]) -> tuple[str, ...]:
    """Canonical labels, plain DDP first (the reference), no repeats, otherwise in the given order."""
    labels = [parse_setting(text).label for text in texts]
    return tuple(dict.fromkeys(["none", *labels]))


@dataclass(frozen=True)
class BenchJob:
    """One torchrun job of the bench: a worker module, its arguments and its output file."""

    name: str  # "net", "tcp", "scaling:<setting>", "socket:<threads>x<socks>", "socket:default"
    kind: Literal["net", "tcp", "scaling", "socket", "strategy"]
    title: str  # for progress lines
    module: str
    args: tuple[str, ...]
    output: str  # file (in the results dir) rank 0 writes
    timeout_s: float
    env: tuple[tuple[str, str], ...] = ()
    setting: str | None = None
    socket: tuple[int, int] | None = None  # (NCCL_SOCKET_NTHREADS, NCCL_NSOCKS_PERTHREAD)
    tcp_output: str | None = None
    strategy: str | None = None  # kind "strategy": ddp, fsdp or hsdp

    @property
    def slug(self) -> str:
        return self.name.replace(":", "-").replace("+", "-")


def pg_timeout(job_timeout: float) -> float:
    """The ranks' own process-group timeout: short enough that they fail before the job is killed."""
    return max(5.0, job_timeout - max(10.0, 0.1 * job_timeout))


def _tcp_rounds(nodes: int) -> int:
    return 2 * (nodes - 1 + nodes % 2) if nodes > 1 else 0


def plan_jobs(o: BenchOptions, results_dir: str, *, nnodes: int,
              backend: str) -> tuple[tuple[BenchJob, ...], tuple[str, ...]]:
    """The jobs every node runs, in order, and the notes on what is skipped and why.

    ``backend`` is the resolved one (``gloo``/``nccl``); the socket sweep needs NCCL and 2+ nodes.
    """
    out = PurePath(results_dir)
    jobs: list[BenchJob] = []
    notes: list[str] = []
    tcp = o.tcp and nnodes > 1
    if o.tcp and nnodes == 1:
        notes.append(_("raw TCP baseline skipped: one node has no inter-node link"))
    tcp_args = ("--seconds", f"{o.tcp_seconds:g}", "--streams", ",".join(map(str, o.tcp_streams)),
                "--max-bytes", str(o.tcp_max_bytes))
    tcp_budget = _tcp_rounds(nnodes) * len(o.tcp_streams) * (o.tcp_seconds + 5)
    if o.collectives:
        timeout = o.net_timeout + tcp_budget
        args = ["-b", str(o.min_bytes), "-e", str(o.max_bytes), "-f", str(o.step_factor),
                "-w", str(o.warmup_iters), "-n", str(o.iters), "--ops", ",".join(o.ops),
                "--backend", o.backend, "--timeout", f"{pg_timeout(timeout):g}",
                "--out", str(out / "collectives.json")]
        if tcp:
            args += ["--tcp-out", str(out / "tcp.json"), "--tcp-seconds", f"{o.tcp_seconds:g}",
                     "--tcp-streams", ",".join(map(str, o.tcp_streams)),
                     "--tcp-max-bytes", str(o.tcp_max_bytes)]
        jobs.append(BenchJob("net", "net", _("raw TCP and collective sweep") if tcp else
                             _("collective sweep"), COLLECTIVES_MODULE, tuple(args), "collectives.json",
                             timeout, tcp_output="tcp.json" if tcp else None))
    elif tcp:
        timeout = tcp_budget + 60
        jobs.append(BenchJob("tcp", "tcp", _("raw TCP baseline"), TCP_MODULE,
                             (*tcp_args, "--backend", o.backend, "--timeout",
                              f"{pg_timeout(timeout):g}", "--out", str(out / "tcp.json")),
                             "tcp.json", timeout, tcp_output="tcp.json"))
    if o.scaling:
        if nnodes == 1:
            notes.append(_("scaling: one node, so only the 1-node steps are measured (no "
                           "efficiency)"))
        for setting in normalise_settings(o.settings):
            name = f"scaling:{setting}"
            slug = name.replace(":", "-").replace("+", "-")
            jobs.append(BenchJob(
                name, "scaling", _("DDP steps, {setting}", setting=setting), SCALING_MODULE,
                ("--setting", setting, "--params", str(o.params), "--batch", str(o.batch),
                 "--steps", str(o.steps), "--warmup", str(o.warmup_steps), "--powersgd-warmup",
                 str(o.powersgd_warmup), "--backend", o.backend, "--timeout",
                 f"{pg_timeout(o.setting_timeout):g}", "--out", str(out / f"{slug}.json")),
                f"{slug}.json", o.setting_timeout, setting=setting))
    jobs.extend(_strategy_jobs(o, out))
    if o.strategies and nnodes == 1:
        notes.append(_("strategies: one node, so only the 1-node steps are measured"))
    if o.socket_sweep:
        reason = socket_sweep_skip_reason(backend, nnodes)
        if reason:
            notes.append(_("socket sweep skipped: {reason}", reason=reason))
        else:
            jobs.extend(_socket_jobs(o, out))
    return tuple(jobs), tuple(notes)


def socket_sweep_skip_reason(backend: str, nnodes: int) -> str | None:
    if backend != "nccl":
        return _("NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD are NCCL's; this bench runs "
                 "{backend} (needs CUDA GPUs and --backend nccl or auto)", backend=backend)
    if nnodes < 2:
        return _("NCCL's socket transport carries only inter-node traffic: run it on 2+ nodes")
    return None


def resolve_backend(requested: str) -> str:
    """``auto``: NCCL where CUDA and NCCL are there, else Gloo (imports torch); else as given."""
    if requested != "auto":
        return requested
    import torch
    import torch.distributed as dist

    return "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"


def _strategy_jobs(o: BenchOptions, out: PurePath) -> list[BenchJob]:
    """One job per strategy (a hang or crash costs that strategy only), in BENCH_STRATEGIES order."""
    jobs = []
    for strategy in (s for s in BENCH_STRATEGIES if s in o.strategies):
        jobs.append(BenchJob(
            f"strategy:{strategy}", "strategy", _("{strategy} steps", strategy=strategy.upper()),
            STRATEGIES_MODULE,
            ("--strategy", strategy, "--params", str(o.params), "--batch", str(o.batch),
             "--steps", str(o.steps), "--warmup", str(o.warmup_steps), "--backend", o.backend,
             "--timeout", f"{pg_timeout(o.setting_timeout):g}",
             "--out", str(out / f"strategy-{strategy}.json")),
            f"strategy-{strategy}.json", o.setting_timeout, env=STRATEGY_ENV, strategy=strategy))
    return jobs


def _socket_jobs(o: BenchOptions, out: PurePath) -> list[BenchJob]:
    low = max(o.min_bytes, o.max_bytes // 4)
    grid = QUICK_SOCKET_GRID if o.quick else SOCKET_GRID
    combos: list[tuple[int, int] | None] = [None, *grid]
    jobs = []
    for combo in combos:
        tag = "default" if combo is None else f"{combo[0]}x{combo[1]}"
        env = () if combo is None else (("NCCL_SOCKET_NTHREADS", str(combo[0])),
                                        ("NCCL_NSOCKS_PERTHREAD", str(combo[1])))
        timeout = min(o.net_timeout, 300.0)
        jobs.append(BenchJob(
            f"socket:{tag}", "socket", _("NCCL sockets default") if combo is None else
            _("NCCL sockets {threads} threads x {socks}", threads=combo[0], socks=combo[1]),
            COLLECTIVES_MODULE,
            ("-b", str(low), "-e", str(o.max_bytes), "-f", "2", "-w", str(max(1, o.warmup_iters)),
             "-n", str(o.iters), "--ops", "all_reduce", "--backend", "nccl", "--timeout",
             f"{pg_timeout(timeout):g}", "--out", str(out / f"socket-{tag}.json")),
            f"socket-{tag}.json", timeout, env=env, socket=combo))
    return jobs


def job_config(base: LaunchConfig, job: BenchJob, index: int, previous: BenchJob | None,
               run_dir: str) -> LaunchConfig:
    """The launch configuration of job ``index``: its own port, run dir, timeouts and env.

    After the first job the nodes are in lock step up to one job's timeout (one node may still be
    waiting out a hung job while another has moved on), so the waits are that long, no longer.
    """
    port = base.master_port + index
    if port > LARGEST_PORT:
        raise _bad(_("job {index} would need master port {port}", index=index, port=port),
                   _("pass a lower --master-port: the bench uses master_port .. master_port + "
                     "jobs - 1"))
    timeout = base.job_timeout if base.job_timeout is not None else job.timeout_s
    connect, rdzv = base.connect_timeout, base.rdzv_timeout
    if previous is not None:
        lag = base.job_timeout if base.job_timeout is not None else previous.timeout_s
        connect = max(connect, lag + 30.0)
        rdzv = int(math.ceil(lag + 60.0))
    return replace(base, entry=job.module, is_module=True, entry_args=job.args, master_port=port,
                   job_timeout=timeout, connect_timeout=connect, rdzv_timeout=rdzv,
                   run_dir=str(PurePath(run_dir) / f"{index:02d}-{job.slug}"),
                   extra_env=base.extra_env + job.env)


def peer_argv(o: BenchOptions) -> tuple[str, ...]:
    """``bench`` and the flags that make another node plan exactly the same jobs: only those that
    differ from what the other node would take anyway (the defaults, or ``--quick``'s), so the
    line to type stays short."""
    base = BenchOptions(**QUICK, quick=True) if o.quick else BenchOptions()
    argv = ["bench"] + (["--quick"] if o.quick else [])
    phases = (("collectives", o.collectives, base.collectives), ("tcp", o.tcp, base.tcp),
              ("scaling", o.scaling, base.scaling),
              ("socket-sweep", o.socket_sweep, base.socket_sweep))
    if any(mine != theirs for _, mine, theirs in phases):  # naming any phase names them all
        argv += [f"--{flag}" for flag, mine, _ in phases if mine]
    argv += ["--strategies", ",".join(o.strategies)] if o.strategies else []
    argv += (_differs("-b", o.min_bytes, base.min_bytes, str(o.min_bytes))
             + _differs("-e", o.max_bytes, base.max_bytes, str(o.max_bytes))
             + _differs("-f", o.step_factor, base.step_factor, str(o.step_factor))
             + _differs("-w", o.warmup_iters, base.warmup_iters, str(o.warmup_iters))
             + _differs("-n", o.iters, base.iters, str(o.iters))
             + _differs("--ops", o.ops, base.ops, ",".join(o.ops))
             + _differs("--tcp-seconds", o.tcp_seconds, base.tcp_seconds, f"{o.tcp_seconds:g}")
             + _differs("--tcp-streams", o.tcp_streams, base.tcp_streams,
                        ",".join(map(str, o.tcp_streams)))
             + _differs("--tcp-max-bytes", o.tcp_max_bytes, base.tcp_max_bytes,
                        str(o.tcp_max_bytes))
             + _differs("--params", o.params, base.params, str(o.params))
             + _differs("--batch", o.batch, base.batch, str(o.batch))
             + _differs("--steps", o.steps, base.steps, str(o.steps))
             + _differs("--warmup", o.warmup_steps, base.warmup_steps, str(o.warmup_steps))
             + _differs("--powersgd-warmup", o.powersgd_warmup, base.powersgd_warmup,
                        str(o.powersgd_warmup))
             + _differs("--settings", o.settings, base.settings, ",".join(o.settings))
             + _differs("--backend", o.backend, base.backend, o.backend)
             + _differs("--setting-timeout", o.setting_timeout, base.setting_timeout,
                        f"{o.setting_timeout:g}")
             + _differs("--net-timeout", o.net_timeout, base.net_timeout, f"{o.net_timeout:g}"))
    return tuple(argv)


def _differs(flag: str, mine: object, theirs: object, text: str) -> list[str]:
    return [flag, text] if mine != theirs else []
