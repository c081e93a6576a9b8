"""DDP training-step benchmark for one setting, on one node and on all nodes, in one torchrun job.

    torchrun ... -m ddpkit.workers.scaling --setting bf16+accumulate:4 --params 25000000 \\
        --batch 64 --steps 10 --warmup 3 --out scaling-bf16.json

The model is an MLP of square ``width x width`` layers (:func:`mlp_shape` picks the width and depth
closest to ``--params``), the data synthetic (fixed random tensors per rank, so no input pipeline
is timed), the loss MSE, the optimizer plain SGD.

Phases, each a fresh model and a fresh ``DistributedDataParallel``:

1. **one node**: every node runs DDP over a process group of its own ranks only (no inter-node
   traffic), all nodes at the same time, so each node's CPUs are exactly as busy as in phase 2:
   plain DDP (the reference), then the setting's comm hook alone (its own cost at one node: DDP runs
   the hook at any world size).
2. **all nodes**: the setting over every rank: the same per-rank batch (weak scaling).
3. **one node again**: plain DDP once more; the reference is the mean of 1 and 3, which brackets 2.

A setting is ``none``, ``bf16``, ``fp16``, ``powersgd:R``, ``accumulate:K`` or ``<hook>+accumulate:K``.
Hooks go through :func:`ddpkit.ddp.apply_comm_hook`, exactly as a user would adopt them. PowerSGD
gets its warm-up (``start_powerSGD_iter``, ``--powersgd-warmup``, torch's minimum 2) and the
untimed warm-up steps cover it, so the timed steps are compressed ones; on Gloo its DDP has one
bucket (PowerSGD with several Gloo buckets hangs across nodes). Accumulation K runs K-1 of every K
micro-steps under ``no_sync()``; step times are per micro-step. Each phase checks that every replica
ended with bit-identical parameters and a finite loss.

Rank 0 writes a ``ddpkit.scaling-run/1`` document after each phase (so a hang or crash later keeps
what was measured) and its current stage to ``<out>.stage``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ddpkit.atomic_file import replace_file
from ddpkit.bench.setting import HookName, hook_label, parse_setting
from ddpkit.ddp import apply_comm_hook
from ddpkit.workers.json_collective import all_gather_json

SCHEMA = "ddpkit.scaling-run/1"
DEFAULT_WIDTHS = (64, 128, 256, 512, 1024, 2048, 4096)


def mlp_shape(params: int) -> tuple[int, int]:
    """``(width, depth)`` of square layers (weight + bias) whose parameter count is closest to
    ``params``; width from 64 to 4096 (a power of two near ``sqrt(params / 6)``)."""
    if params < 1:
        raise ValueError("params must be >= 1")
    target = math.sqrt(params / 6)
    width = min(DEFAULT_WIDTHS, key=lambda w: abs(math.log(w / target)))
    depth = max(1, round(params / (width * width + width)))
    return width, depth


class Run:
    def __init__(self, args: argparse.Namespace, backend: str, device: torch.device) -> None:
        self.args = args
        self.backend = backend
        self.device = device
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.doc: dict[str, Any] = {"schema": SCHEMA, "setting": args.setting, "ok": False,
                                    "backend": backend, "device": device.type,
                                    "world_size": self.world, "phases": {}}

    def stage(self, text: str) -> None:
        if self.rank == 0 and self.args.out is not None:
            replace_file(f"{self.args.out}.stage", f"{text}\n")

    def save(self) -> None:
        if self.rank == 0 and self.args.out is not None:
            replace_file(self.args.out, json.dumps(self.doc, indent=2) + "\n")


def node_groups() -> tuple[Any, list[list[int]]]:
    """This rank's node-local process group, and every node's ranks (every rank creates them all)."""
    node = int(os.environ.get("GROUP_RANK", "0"))
    members: list[Any] = all_gather_json([node, dist.get_rank()])
    by_node: dict[int, list[int]] = {}
    for node_rank, rank in members:
        by_node.setdefault(node_rank, []).append(rank)
    layout = [sorted(by_node[n]) for n in sorted(by_node)]
    mine = None
    for ranks in layout:
        group = dist.new_group(ranks=ranks)
        if dist.get_rank() in ranks:
            mine = group
    return mine, layout


def build_model(width: int, depth: int, device: torch.device) -> torch.nn.Module:
    torch.manual_seed(1234)
    layers: list[torch.nn.Module] = []
    for index in range(depth):
        layers.append(torch.nn.Linear(width, width))
        if index < depth - 1:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _reduce(value: float, op: Any, group: Any, device: torch.device) -> float:
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=op, group=group)
    return float(t.item())


def time_phase(run: Run, *, hook: HookName, rank: int | None, accumulate: int, group: Any,
               group_size: int, phase: str) -> dict[str, Any]:
    """Warm up, then time micro-steps of DDP with ``hook`` and ``accumulate`` over ``group``."""
    args, device = run.args, run.device
    width, depth = mlp_shape(args.params)
    model = build_model(width, depth, device)
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    spec = hook_label(hook, rank)
    if hook == "powersgd":
        spec = f"powersgd:{rank}:warmup={args.powersgd_warmup}"
    single_bucket_mb = None
    if hook == "powersgd" and run.backend == "gloo":
        single_bucket_mb = max(1, math.ceil(grad_bytes / 2**20) + 1)
    ddp = DistributedDataParallel(
        model, process_group=group, device_ids=[run.local_rank] if device.type == "cuda" else None,
        bucket_cap_mb=single_bucket_mb)
    info = apply_comm_hook(ddp, spec, process_group=group)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-4)
    generator = torch.Generator().manual_seed(1000 + run.rank)
    x = torch.randn(args.batch, width, generator=generator).to(device)
    y = torch.randn(args.batch, width, generator=generator).to(device)
    syncs_warmup = args.warmup
    if hook == "powersgd":
        syncs_warmup = max(syncs_warmup, args.powersgd_warmup + 2)  # time compressed steps only
    warm_micro = syncs_warmup * accumulate
    timed_micro = math.ceil(args.steps / accumulate) * accumulate
    last_loss: list[torch.Tensor] = []  # read once at the end: no device sync inside the loop

    def micro_step(index: int) -> None:
        sync = (index + 1) % accumulate == 0
        context = contextlib.nullcontext() if sync else ddp.no_sync()
        with context:
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            loss.backward()  # type: ignore[no-untyped-call]
        if sync:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        last_loss[:] = [loss.detach()]

    dist.barrier()  # every node starts (and below: times) together, so CPUs are as busy as in
    # the all-nodes phase, even where several simulated nodes share one machine
    for index in range(warm_micro):
        run.stage(f"{phase}: warm-up micro-step {index + 1}/{warm_micro}")
        micro_step(index)
    _sync(device)
    dist.barrier()
    run.stage(f"{phase}: timing {timed_micro} micro-steps")
    start = time.perf_counter()
    for index in range(timed_micro):
        micro_step(warm_micro + index)
    _sync(device)
    elapsed = time.perf_counter() - start
    loss_value = float(last_loss[0]) if last_loss else float("nan")
    slowest = _reduce(elapsed, dist.ReduceOp.MAX, group, device)
    checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
    low = _reduce(checksum, dist.ReduceOp.MIN, group, device)
    high = _reduce(checksum, dist.ReduceOp.MAX, group, device)
    problems = []
    if low != high:
        problems.append("replicas ended with different parameters")
    if not (math.isfinite(loss_value) and math.isfinite(checksum)):
        problems.append("loss or parameters are not finite")
    step = slowest / timed_micro
    return {
        "hook": spec, "implementation": info.implementation, "accumulate": accumulate,
        "ranks": group_size, "batch_per_rank": args.batch, "warmup_micro_steps": warm_micro,
        "timed_micro_steps": timed_micro, "step_s": step,
        "samples_per_s": group_size * args.batch / step, "final_loss": loss_value,
        "bucket_cap_mb": single_bucket_mb, "notes": list(info.notes), "ok": not problems,
        "problems": problems,
        # this rank's intra-op threads and where they came from: nodes that ran with different
        # counts make the 1-node reference and the N-node step incomparable (the merge says so)
        "threads": torch.get_num_threads(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }


def _gather_node_results(result: dict[str, Any] | None, layout: list[list[int]]) -> list[Any]:
    """Every node's phase-1 result (from its lowest rank), in node order."""
    parts: list[Any] = all_gather_json(result)
    return [parts[ranks[0]] for ranks in layout]


def run_phases(run: Run) -> None:
    args = run.args
    hook, rank, accumulate = parse_setting(args.setting)
    width, depth = mlp_shape(args.params)
    run.doc["model"] = {"kind": "mlp", "width": width, "depth": depth,
                        "params": depth * (width * width + width), "grad_dtype": "fp32",
                        "batch_per_rank": args.batch}
    group, layout = node_groups()
    run.doc["nodes"] = len(layout)
    run.doc["ranks_per_node"] = [len(ranks) for ranks in layout]
    run.save()  # a hang in the first phase still leaves the model and the layout
    mine = next(ranks for ranks in layout if run.rank in ranks)
    leader = run.rank == mine[0]
    one_node: dict[str, Any] = {}
    run.doc["phases"]["one_node"] = one_node

    def alone(phase_hook: HookName, phase_rank: int | None, when: str) -> dict[str, Any]:
        label = hook_label(phase_hook, phase_rank)
        result = time_phase(run, hook=phase_hook, rank=phase_rank, accumulate=1, group=group,
                            group_size=len(mine), phase=f"one node, {label}{when}")
        per_node = _gather_node_results(result if leader else None, layout)
        return {
            "step_s": sum(r["step_s"] for r in per_node) / len(per_node),
            "per_node_step_s": [r["step_s"] for r in per_node],
            "per_node_threads": [[r.get("threads"), r.get("omp_num_threads")] for r in per_node],
            "ok": all(r["ok"] for r in per_node),
            "problems": sorted({p for r in per_node for p in r["problems"]}),
            "detail": per_node[0],
        }

    one_node["none"] = alone("none", None, "")
    run.save()
    if hook != "none":
        one_node[hook_label(hook, rank)] = alone(hook, rank, "")
        run.save()
    if len(layout) < 2:
        run.doc["ok"] = all(entry["ok"] for entry in one_node.values())
        run.doc["note"] = "one node: there is no multi-node phase"
        return
    result = time_phase(run, hook=hook, rank=rank, accumulate=accumulate, group=None,
                        group_size=run.world, phase=f"{len(layout)} nodes, {args.setting}")
    run.doc["phases"]["all_nodes"] = result
    run.save()
    # The reference once more, after: its mean brackets the all-nodes phase, so a machine that
    # got slower or faster meanwhile (other load) biases the ratio less.
    before, after = one_node["none"], alone("none", None, ", again")
    one_node["none"] = {
        **before, "step_s": (before["step_s"] + after["step_s"]) / 2,
        "before_step_s": before["step_s"], "after_step_s": after["step_s"],
        "ok": before["ok"] and after["ok"], "problems": sorted({*before["problems"],
                                                                 *after["problems"]}),
    }
    run.doc["ok"] = result["ok"] and all(entry["ok"] for entry in one_node.values())


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ddpkit.workers.scaling",
                                description="DDP step benchmark: one node vs all nodes")
    p.add_argument("--setting", default="none")
    p.add_argument("--params", type=int, default=25_000_000)
    p.add_argument("--batch", type=int, default=64, help="samples per rank per micro-step")
    p.add_argument("--steps", type=int, default=10, help="timed micro-steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed optimizer steps first")
    p.add_argument("--powersgd-warmup", type=int, default=2,
                   help="start_powerSGD_iter for the benchmark (torch's minimum is 2)")
    p.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    p.add_argument("--timeout", type=float, default=120.0, help="process group timeout (s)")
    p.add_argument("--out", type=Path, default=None, help="JSON results (written by rank 0)")
    return p


def backend_and_device(requested: str) -> tuple[str, Any]:
    """The backend (``auto``: NCCL with CUDA, else Gloo) and this rank's device for it."""
    backend = requested
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    return backend, device


@contextlib.contextmanager
def process_group(backend: str, timeout: float) -> Iterator[None]:
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    try:
        yield
    finally:
        gc.collect()  # nothing of Gloo's may be left for interpreter exit (launch/torchrun/tracebacks.py)
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        parse_setting(args.setting)
    except ValueError as exc:
        parser.error(str(exc))
    if args.params < 1 or args.batch < 1 or args.steps < 1 or args.warmup < 0 or \
            args.powersgd_warmup < 2:
        parser.error("need --params, --batch, --steps >= 1, --warmup >= 0, --powersgd-warmup >= 2")
    backend, device = backend_and_device(args.backend)
    with process_group(backend, args.timeout):
        run = Run(args, backend, device)
        run.doc["torch_version"] = torch.__version__
        try:
            run_phases(run)
        except Exception as exc:
            run.doc["ok"] = False
            run.doc["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
            run.save()
            run.stage("failed")
            sys.stderr.write(traceback.format_exc())
            return 1
        run.save()
        run.stage("done")
        if run.rank == 0:
            _print_summary(run.doc)
    return 0 if run.doc["ok"] else 1


def _print_summary(doc: dict[str, Any]) -> None:
    lines = []
    for label, entry in sorted(doc["phases"].get("one_node", {}).items()):
        lines.append(f"# one node, {label}: {entry['step_s'] * 1e3:.1f} ms/step")
    multi = doc["phases"].get("all_nodes")
    if multi:
        lines.append(f"# {doc['nodes']} nodes, {doc['setting']}: {multi['step_s'] * 1e3:.1f} ms/step, "
                     f"{multi['samples_per_s']:.0f} samples/s")
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main())
