"""Adopt a gradient-traffic reduction in one line: ``apply_comm_hook(ddp_model, "bf16")``.

A thin layer over torch's own DDP communication hooks
(``torch.distributed.algorithms.ddp_comm_hooks``), choosing the one that works on the backend at
hand and refusing the combination known to hang:

* ``none``: DDP's built-in all-reduce (nothing is registered).
* ``fp16``: torch's ``default_hooks.fp16_compress_hook`` (works on NCCL and Gloo).
* ``bf16``: torch's ``default_hooks.bf16_compress_hook`` on NCCL. DDP refuses that hook without
  CUDA + NCCL (``TypeError``), so on any other backend (Gloo) ddpkit registers its own small hook
  that does the same thing: cast the bucket to bf16, divide by the world size, all-reduce, copy back.
* ``powersgd:R`` / ``powersgd:R:warmup=N``: torch's ``powerSGD_hook`` with
  ``PowerSGDState(matrix_approximation_rank=R, start_powerSGD_iter=N)`` (N defaults to torch's 1000;
  torch requires N >= 2). On Gloo, PowerSGD across nodes hung or crashed in 9 of 11 runs with DDP's
  default 25 MiB buckets (its callback issues a nested all_reduce from a Gloo worker thread, so ranks
  can order collectives differently) and passed 12 of 12 with a single bucket. So on Gloo this
  function requires a single bucket - DDP built with ``bucket_cap_mb`` at least the size of all
  gradients - and raises ``powersgd-gloo-buckets`` otherwise, unless ``allow_gloo_multi_bucket=True``.

torch is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ddpkit.bench.setting import COMPRESSIONS, POWERSGD, HookName
from ddpkit.errors import ConfigError, EnvironmentProblem

HOOK_NAMES: tuple[str, ...] = (*COMPRESSIONS, POWERSGD)
TORCH_POWERSGD_WARMUP = 1000  # torch's own default start_powerSGD_iter
_SPEC = re.compile(rf"^({'|'.join(COMPRESSIONS)}|{POWERSGD}:(\d+)(?::warmup=(\d+))?)$")
_SPEC_HINT = "use one of: none, bf16, fp16, powersgd:R or powersgd:R:warmup=N (e.g. powersgd:4)"


@dataclass(frozen=True)
class CommHookSpec:
    name: HookName
    rank: int | None = None
    warmup: int | None = None

    def __str__(self) -> str:
        if self.name == "powersgd":
            return f"powersgd:{self.rank}:warmup={self.warmup}"
        return self.name


@dataclass(frozen=True)
class HookInfo:
    """What :func:`apply_comm_hook` registered."""

    spec: str  # normalised, e.g. "powersgd:4:warmup=1000"
    name: str
    backend: str
    implementation: str  # which code runs, e.g. "torch default_hooks.fp16_compress_hook"
    powersgd_rank: int | None = None
    warmup: int | None = None
    state: Any = None  # the PowerSGDState for powersgd (save it with checkpoints), else None
    notes: tuple[str, ...] = ()


def parse_comm_hook_spec(spec: str) -> CommHookSpec:
    """Check a hook spec without touching torch."""
    text = spec.strip().lower()
    match = _SPEC.match(text)
    if match is None:
        raise ConfigError("unknown-comm-hook", f"unknown communication hook {spec!r}", _SPEC_HINT)
    if not text.startswith("powersgd"):
        return CommHookSpec(next(c for c in COMPRESSIONS if c == text))  # _SPEC matched one
    rank = int(match.group(2))
    warmup = TORCH_POWERSGD_WARMUP if match.group(3) is None else int(match.group(3))
    if rank < 1:
        raise ConfigError("bad-comm-hook", f"{spec!r}: PowerSGD rank must be at least 1",
                          "use powersgd:1, powersgd:2 or powersgd:4")
    if warmup < 2:
        raise ConfigError("bad-comm-hook", f"{spec!r}: PowerSGD warm-up must be at least 2 steps",
                          "torch needs start_powerSGD_iter >= 2 with error feedback; "
                          "e.g. powersgd:4:warmup=1000 (about 10% of training)")
    return CommHookSpec("powersgd", rank, warmup)


def gradient_bytes(ddp_model: Any) -> int:
    """Bytes of all gradients DDP reduces: every parameter that requires a gradient."""
    return sum(p.numel() * p.element_size() for p in ddp_model.module.parameters()
               if p.requires_grad)


def single_bucket(ddp_model: Any) -> bool | None:
    """Whether DDP will put every gradient in one bucket; None if the model does not say.

    torch's DDP exposes ``bucket_bytes_cap`` (bytes), ``bucket_bytes_cap_default`` (True when
    ``bucket_cap_mb`` was not given, which also adds a small first bucket) and
    ``bucket_bytes_cap_list`` (per-bucket caps).
    """
    cap = getattr(ddp_model, "bucket_bytes_cap", None)
    default = getattr(ddp_model, "bucket_bytes_cap_default", None)
    if not isinstance(cap, int) or not isinstance(default, bool):
        return None
    if default or list(getattr(ddp_model, "bucket_bytes_cap_list", []) or []):
        return False
    return gradient_bytes(ddp_model) <= cap


def _cast_allreduce_hook(dtype: Any) -> Any:
    """ddpkit's own cast-allreduce-cast hook: bf16 on backends where DDP refuses torch's."""
    import torch
    import torch.distributed as dist

    def ddpkit_cast_allreduce_hook(group: Any, bucket: Any) -> Any:
        use = group if group is not None else dist.group.WORLD
        full = bucket.buffer()
        low = full.to(dtype)
        low.div_(dist.get_world_size(use))
        work = dist.all_reduce(low, group=use, async_op=True)

        def restore(fut: Any) -> Any:
            full.copy_(fut.value()[0])
            return full

        return work.get_future().then(restore)

    # DDP inspects the hook's signature and accepts only real GradBucket / Future[Tensor]
    # annotations; this module's postponed (string) annotations would be refused.
    ddpkit_cast_allreduce_hook.__annotations__ = {
        "group": Any,
        "bucket": dist.GradBucket,  # type: ignore[attr-defined]
        "return": torch.futures.Future[torch.Tensor],
    }
    return ddpkit_cast_allreduce_hook


def _register(ddp_model: Any, state: Any, hook: Any, spec: str) -> None:
    try:
        ddp_model.register_comm_hook(state, hook)
    except RuntimeError as exc:
        if "only be called once" in str(exc):
            raise ConfigError("comm-hook-already-set",
                              f"cannot apply {spec!r}: this DDP model already has a comm hook",
                              "apply one hook per DistributedDataParallel instance") from exc
        raise


def apply_comm_hook(
    ddp_model: Any,
    spec: str,
    *,
    process_group: Any = None,
    allow_gloo_multi_bucket: bool = False,
) -> HookInfo:
    """Register the communication hook ``spec`` on a ``DistributedDataParallel`` model.

    ``process_group`` defaults to the default group. Raises ``ConfigError`` with id
    ``unknown-comm-hook``, ``bad-comm-hook``, ``not-a-ddp-model``, ``comm-hook-already-set`` or
    ``powersgd-gloo-buckets``.
    """
    parsed = parse_comm_hook_spec(spec)
    if not callable(getattr(ddp_model, "register_comm_hook", None)):
        raise ConfigError("not-a-ddp-model",
                          f"apply_comm_hook needs a DistributedDataParallel model, got "
                          f"{type(ddp_model).__name__}",
                          "wrap the model first: DistributedDataParallel(model, ...)")
    import torch
    import torch.distributed as dist

    backend = str(dist.get_backend(process_group)).lower()
    if parsed.name == "none":
        return HookInfo("none", "none", backend, "DDP built-in all-reduce")
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    if parsed.name == "fp16":
        _register(ddp_model, process_group, default_hooks.fp16_compress_hook, spec)
        return HookInfo("fp16", "fp16", backend, "torch default_hooks.fp16_compress_hook")
    if parsed.name == "bf16":
        if backend == "nccl":
            _register(ddp_model, process_group, default_hooks.bf16_compress_hook, spec)
            return HookInfo("bf16", "bf16", backend, "torch default_hooks.bf16_compress_hook")
        _register(ddp_model, process_group, _cast_allreduce_hook(torch.bfloat16), spec)
        return HookInfo("bf16", "bf16", backend, "ddpkit cast-allreduce-cast hook (bf16)",
                        notes=(f"torch's bf16_compress_hook needs CUDA + NCCL; on {backend} "
                               "ddpkit's equivalent hook runs instead",))
    notes: tuple[str, ...] = ()
    if backend == "gloo":
        notes = _check_gloo_buckets(ddp_model, parsed, allow_gloo_multi_bucket)
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook

    try:
        state = powerSGD_hook.PowerSGDState(
            process_group=process_group,
            matrix_approximation_rank=parsed.rank,
            start_powerSGD_iter=parsed.warmup,
        )
    except ModuleNotFoundError as exc:  # torch's PowerSGD needs numpy; torch itself does not
        raise EnvironmentProblem(
            "missing-package", f"PowerSGD needs the Python package {exc.name or 'numpy'}, which is "
            "not installed here", "install ddpkit with its dependencies (they include numpy) or "
            "`pip install numpy`; or pick another setting: none, bf16, fp16") from exc
    _register(ddp_model, state, powerSGD_hook.powerSGD_hook, spec)
    return HookInfo(str(parsed), "powersgd", backend, "torch powerSGD_hook.powerSGD_hook",
                    powersgd_rank=parsed.rank, warmup=parsed.warmup, state=state,
                    notes=notes + ("PowerSGD changes the optimisation: compare loss curves with "
                                   "plain DDP before trusting it",))


def _check_gloo_buckets(ddp_model: Any, parsed: CommHookSpec, allow: bool) -> tuple[str, ...]:
    one = single_bucket(ddp_model)
    if one:
        return ()
    if allow:
        return ("allow_gloo_multi_bucket=True: PowerSGD on Gloo with several buckets hung or "
                "crashed across nodes in the field tests",)
    need_mb = max(1, math.ceil(gradient_bytes(ddp_model) / 2**20))
    cause = ("cannot tell how many buckets this DDP model uses" if one is None
             else "this DDP model reduces gradients in several buckets")
    raise ConfigError(
        "powersgd-gloo-buckets",
        f"{parsed} on Gloo: {cause}; PowerSGD with several Gloo buckets hangs or crashes "
        "across nodes (collective order mismatch)",
        f"build DDP with one bucket: DistributedDataParallel(model, bucket_cap_mb={need_mb}) "
        "(>= all gradients), or pass allow_gloo_multi_bucket=True if you accept the risk",
        details={"gradient_bytes": gradient_bytes(ddp_model), "bucket_cap_mb_needed": need_mb},
    )
