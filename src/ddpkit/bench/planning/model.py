"""The `ddpkit plan` model: gradient all-reduce time, overlap, step time and parallel efficiency.

Pure arithmetic on frozen dataclasses; no I/O, no torch. docs/plan.md derives every formula.

* Payload ``S`` = parameters x bytes per gradient element (after any compression).
* All-reduce time, bandwidth-only (alpha-beta model with alpha = 0):

  - ``hierarchical`` (default): intra-node reduce-scatter, inter-node ring all-reduce of each GPU's
    shard (all G rings share the node's network link), intra-node all-gather, one after another::

        t = 2(G-1)/G * S / B_intra  +  2(N-1)/N * S / B_inter

    2(N-1)/N * S per node is the least any all-reduce can move through a node's link.
  - ``flat-ring``: one ring over all k = N*G ranks, as NCCL's ring algorithm runs; every link,
    including each node's network link, carries 2(k-1)/k * S::

        t = 2(k-1)/k * S / min(B_inter, B_intra)

* Exposed communication after overlap with the backward pass, ``phi`` = overlap fraction::

      exposed = comm - phi * min(comm, compute)

  at most a fraction phi of the communication can hide, and only behind phi of the compute.
* Gradient accumulation k: one all-reduce per k micro-steps; per micro-step
  ``step = compute + (exposed + hook_overhead) / k``.
* Efficiency (weak scaling, same per-GPU batch) = 1-node step (plain DDP) / N-node step (setting);
  throughput vs one node = N x efficiency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ddpkit.bench import setting as setting_grammar
from ddpkit.bench.setting import HookName
from ddpkit.errors import UsageError
from ddpkit.i18n import _

HALF_PRECISION = tuple(c for c in setting_grammar.COMPRESSIONS if c != "none")  # bf16, fp16

GRAD_DTYPE_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2}
ALGORITHMS: tuple[str, ...] = ("hierarchical", "flat-ring")
COMPRESSIONS: tuple[str, ...] = (*setting_grammar.COMPRESSIONS, setting_grammar.POWERSGD)
# torch's PowerSGDState default: compress a matrix only if it shrinks by more than this factor.
POWERSGD_MIN_COMPRESSION_RATE = 2.0


@dataclass(frozen=True)
class Setting:
    """One way of running DDP: a comm hook (``apply_comm_hook`` spec) and an accumulation count."""

    compression: HookName = "none"
    powersgd_rank: int | None = None
    accumulate: int = 1  # micro-steps per all-reduce

    @property
    def hook_spec(self) -> str:
        if self.compression == "powersgd":
            return f"powersgd:{self.powersgd_rank}"
        return self.compression

    @property
    def label(self) -> str:
        parts = [] if self.compression == "none" else [self.hook_spec]
        if self.accumulate > 1:
            parts.append(f"accumulate:{self.accumulate}")
        return "+".join(parts) or "none"

    @property
    def invasiveness(self) -> tuple[int, int, int]:
        """Sort key: how much a setting changes training (casts < batch size < optimisation)."""
        level = {"none": 0, "bf16": 1, "fp16": 1, "powersgd": 4}[self.compression]
        level += 2 if self.accumulate > 1 else 0
        # Among equals prefer fewer accumulation steps and a higher (more faithful) PowerSGD rank.
        return (level, self.accumulate, -(self.powersgd_rank or 0))


def parse_setting(text: str) -> Setting:
    """``none``, ``bf16``, ``fp16``, ``powersgd:R``, ``accumulate:K`` or ``<hook>+accumulate:K``."""
    try:
        parts = setting_grammar.parse_setting(text)
    except setting_grammar.UnknownSetting as exc:
        raise UsageError("bad-setting", _("unknown setting {part!r} in {text!r}", part=exc.part,
                                          text=exc.text),
                         _("settings are none, bf16, fp16, powersgd:R, accumulate:K or e.g. "
                           "bf16+accumulate:4")) from None
    return Setting(*parts)


@dataclass(frozen=True)
class PlanInput:
    """Everything the model needs, already resolved (units in bytes, bytes/s and seconds)."""

    params: int
    grad_dtype: str
    nodes: int
    gpus_per_node: int
    inter_node_bytes_per_s: float
    intra_node_bytes_per_s: float
    step_compute_s: float | None  # None: unknown, the plan reports break-even compute instead
    overlap: float = 0.7
    hidden: int = 4096
    algorithm: str = "hierarchical"
    efficiency_threshold: float = 0.7
    settings: tuple[Setting, ...] = (Setting(),)
    # Per-step hook cost measured on one node (setting label -> seconds), e.g. from a bench run.
    hook_overhead_s: tuple[tuple[str, float], ...] = ()
    # Measured N-node step per setting label (None: that setting failed in the bench run).
    measured_step_s: tuple[tuple[str, float | None], ...] = ()

    @property
    def grad_bytes(self) -> int:
        return GRAD_DTYPE_BYTES[self.grad_dtype]


@dataclass(frozen=True)
class OneNode:
    comm_s: float
    exposed_s: float | None
    step_s: float | None


@dataclass(frozen=True)
class SettingResult:
    setting: Setting
    payload_bytes: float
    comm_s: float  # one all-reduce of the payload on N nodes
    exposed_s: float | None  # per micro-step, after overlap and accumulation
    step_s: float | None  # per micro-step
    efficiency: float | None
    throughput_vs_one_node: float | None
    break_even_compute_s: float  # compute per micro-step at which efficiency = threshold
    measured_step_s: float | None = None
    measured_efficiency: float | None = None
    failed_in_bench: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    measured_check: str | None = None  # why the bench's figure failed its sanity check

    @property
    def best_efficiency(self) -> float | None:
        """Measured efficiency where a bench measured it (and it passed its check), else the
        prediction."""
        if self.measured_efficiency is not None and self.measured_check is None:
            return self.measured_efficiency
        return self.efficiency


def allreduce_seconds(
    payload_bytes: float,
    nodes: int,
    gpus_per_node: int,
    inter_node_bytes_per_s: float,
    intra_node_bytes_per_s: float,
    algorithm: str = "hierarchical",
) -> float:
    """Bandwidth-only time of one all-reduce of ``payload_bytes`` (see the module docstring)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}")
    n, g = nodes, gpus_per_node
    if n == 1:
        return 2 * (g - 1) / g * payload_bytes / intra_node_bytes_per_s if g > 1 else 0.0
    if algorithm == "flat-ring":
        ranks = n * g
        slowest = min(inter_node_bytes_per_s, intra_node_bytes_per_s) if g > 1 else (
            inter_node_bytes_per_s)
        return 2 * (ranks - 1) / ranks * payload_bytes / slowest
    intra = 2 * (g - 1) / g * payload_bytes / intra_node_bytes_per_s if g > 1 else 0.0
    return intra + 2 * (n - 1) / n * payload_bytes / inter_node_bytes_per_s


def exposed_seconds(comm_s: float, compute_s: float, overlap: float) -> float:
    """Communication left on the critical path: ``comm - overlap * min(comm, compute)``."""
    return comm_s - overlap * min(comm_s, compute_s)


def payload_bytes(params: int, grad_bytes: int, setting: Setting, hidden: int) -> float:
    """Bytes one all-reduce moves under ``setting`` (PowerSGD: square ``hidden`` x ``hidden`` layers)."""
    full = float(params * grad_bytes)
    if setting.compression in HALF_PRECISION:
        return float(params * min(grad_bytes, 2))
    if setting.compression == "powersgd":
        rank = setting.powersgd_rank or 1
        ratio = 2.0 * rank / hidden  # r(m+n)/(mn) with m = n = hidden
        return full * ratio if ratio * POWERSGD_MIN_COMPRESSION_RATE < 1.0 else full
    return full


def default_hidden(params: int) -> int:
    """A transformer-like width for ``params``: P = 12 L h^2 with h = 128 L, rounded to 64."""
    width = (params * 128 / 12) ** (1 / 3)
    return max(64, int(round(width / 64)) * 64)


def _micro_step(compute: float, comm: float, overhead: float, inp: PlanInput, k: int) -> float:
    return compute + (exposed_seconds(comm, compute, inp.overlap) + overhead) / k


def _one_node(inp: PlanInput, compute: float | None) -> OneNode:
    comm = allreduce_seconds(inp.params * inp.grad_bytes, 1, inp.gpus_per_node,
                             inp.inter_node_bytes_per_s, inp.intra_node_bytes_per_s, inp.algorithm)
    if compute is None:
        return OneNode(comm, None, None)
    exposed = exposed_seconds(comm, compute, inp.overlap)
    return OneNode(comm, exposed, compute + exposed)


def _efficiency_at(inp: PlanInput, setting: Setting, compute: float, overhead: float) -> float:
    one = _one_node(inp, compute)
    comm = _setting_comm(inp, setting)
    step = _micro_step(compute, comm, overhead, inp, setting.accumulate)
    return (one.step_s or compute) / step


def _setting_comm(inp: PlanInput, setting: Setting) -> float:
    size = payload_bytes(inp.params, inp.grad_bytes, setting, inp.hidden)
    return allreduce_seconds(size, inp.nodes, inp.gpus_per_node, inp.inter_node_bytes_per_s,
                             inp.intra_node_bytes_per_s, inp.algorithm)


def break_even_compute(inp: PlanInput, setting: Setting, overhead: float = 0.0) -> float:
    """Least compute per micro-step from which ``setting`` stays at or above the threshold.

    Efficiency is not monotone in compute when one node has its own all-reduce (G > 1): it is
    piecewise rational with kinks where compute equals a communication time, and monotone beyond
    the last kink. So: scan a log grid, then bisect the last crossing. 0.0 means "any compute".
    """
    def ok(compute: float) -> bool:
        return _efficiency_at(inp, setting, compute, overhead) >= inp.efficiency_threshold

    grid = [math.pow(10.0, exponent / 20) for exponent in range(-180, 181)]  # 1 ns .. 1e9 s
    failing = [t for t in grid if not ok(t)]
    if not failing:
        return 0.0
    low = failing[-1]
    high = next((t for t in grid if t > low), grid[-1] * 10)
    for _step in range(100):
        middle = math.sqrt(low * high)
        low, high = (low, middle) if ok(middle) else (middle, high)
    return high


def compute_from_one_node_step(inp: PlanInput, one_node_step_s: float) -> float:
    """The compute time that makes the modelled 1-node step equal a measured one (G > 1 only differs)."""
    low, high = 0.0, one_node_step_s
    for _step in range(200):
        middle = (low + high) / 2
        step = _one_node(inp, middle).step_s or middle
        low, high = (middle, high) if step < one_node_step_s else (low, middle)
    return (low + high) / 2


def _notes(inp: PlanInput, setting: Setting) -> tuple[str, ...]:
    notes = []
    if setting.compression in HALF_PRECISION and inp.grad_bytes <= 2:
        notes.append(_("gradients are already {dtype}: casting saves nothing",
                       dtype=inp.grad_dtype))
    if setting.compression == "powersgd":
        size = payload_bytes(inp.params, inp.grad_bytes, setting, inp.hidden)
        if size >= inp.params * inp.grad_bytes:
            notes.append(_("rank {rank} does not compress {hidden}-wide layers",
                           rank=setting.powersgd_rank, hidden=inp.hidden))
        notes.append(_("PowerSGD's own compute is not in the model unless a bench measured it"))
    if setting.accumulate > 1:
        notes.append(_("global batch grows {times}x", times=setting.accumulate))
    if setting.compression != "none" and inp.gpus_per_node > 1:
        notes.append(_("the hook also shrinks one node's own all-reduce: efficiency can pass "
                       "100% because the reference is plain DDP on one node"))
    return tuple(notes)


def evaluate(inp: PlanInput) -> tuple[OneNode, tuple[SettingResult, ...]]:
    """Model one node and every setting on ``inp.nodes`` nodes."""
    overheads = dict(inp.hook_overhead_s)
    measured = dict(inp.measured_step_s)
    compute = inp.step_compute_s
    one = _one_node(inp, compute)
    results = []
    for setting in inp.settings:
        hook_label = Setting(setting.compression, setting.powersgd_rank).label
        overhead = overheads.get(hook_label, 0.0)
        size = payload_bytes(inp.params, inp.grad_bytes, setting, inp.hidden)
        comm = _setting_comm(inp, setting)
        k = setting.accumulate
        exposed = step = eff = None
        if compute is not None and one.step_s is not None:
            exposed = (exposed_seconds(comm, compute, inp.overlap) + overhead) / k
            step = compute + exposed
            eff = one.step_s / step
        measured_step = measured.get(setting.label)
        measured_eff = None
        if measured_step is not None and one.step_s is not None:
            measured_eff = one.step_s / measured_step
        results.append(SettingResult(
            setting=setting,
            payload_bytes=size,
            comm_s=comm,
            exposed_s=exposed,
            step_s=step,
            efficiency=eff,
            throughput_vs_one_node=None if eff is None else eff * inp.nodes,
            break_even_compute_s=break_even_compute(inp, setting, overhead),
            measured_step_s=measured_step,
            measured_efficiency=measured_eff,
            failed_in_bench=setting.label in measured and measured_step is None,
            notes=_notes(inp, setting),
        ))
    return one, tuple(results)
