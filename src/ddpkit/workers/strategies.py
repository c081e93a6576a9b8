"""Training steps of one strategy (DDP, FSDP or HSDP), on one node and on all nodes, in one job.

    torchrun ... -m ddpkit.workers.strategies --strategy hsdp --params 4000000 --batch 32 \\
        --steps 6 --warmup 2 --out strategy-hsdp.json

The model is the scaling bench's MLP (:func:`ddpkit.workers.scaling.mlp_shape`), Adam, fp32,
synthetic data per rank. The strategies, as ``ddpkit plan`` models them (docs/plan.md, "Memory
first"):

* ``ddp``: ``DistributedDataParallel`` over the ranks;
* ``fsdp``: ``fully_shard`` per layer and on the whole model, over a 1-D mesh of the ranks;
* ``hsdp``: the same on a 2-D mesh ``(nodes, ranks per node)``: replicated across nodes, sharded
  within one.

Phases, each a fresh model on the same ranks: **one node** (every node alone, all at once, over its
own ranks: the mesh's node-local dimension; FSDP and HSDP are both FSDP there), **all nodes**, and
**one node again** (the reference is the mean of the two, which brackets the all-nodes phase).
Measured per rank: the median step (forward, backward, optimizer step) of the timed steps after the
warm-up; the bytes of the local parameter, gradient and optimizer-state tensors after the last step
(DTensors by their local shard, storages counted once); the peak resident memory over build and
steps above the resident memory before the build (Linux VmHWM, reset through /proc/self/clear_refs;
None where that is not allowed); the peak CUDA memory on GPUs. Per node (its first rank): the bytes
its network interface (``GLOO_SOCKET_IFNAME``, which ``ddpkit launch`` sets; else every one but
``lo``) sent and received during the timed steps, from /proc/net/dev: what crossed the node's link,
plus any other traffic of the machine meanwhile (ranks of one node talk over ``lo``).

Rank 0 writes a ``ddpkit.strategy-run/1`` document after each phase and its stage to
``<out>.stage``. Ranks must be numbered node by node (torchrun does so): the worker checks.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ddpkit.atomic_file import replace_file
from ddpkit.workers.json_collective import all_gather_json
from ddpkit.workers.scaling import backend_and_device, mlp_shape, process_group

SCHEMA = "ddpkit.strategy-run/1"
STRATEGIES = ("ddp", "fsdp", "hsdp")  # ddpkit.bench.run.BENCH_STRATEGIES (a unit test checks)


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def reset_peak_rss() -> bool:
    """Set VmHWM to the current resident set (Linux: ``5`` to /proc/self/clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def interface_bytes(text: str) -> dict[str, tuple[int, int]]:
    """(received, sent) bytes of every interface but ``lo`` in a /proc/net/dev text."""
    counters = {}
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        fields = rest.split()
        if name.strip() != "lo" and len(fields) >= 9:
            counters[name.strip()] = (int(fields[0]), int(fields[8]))
    return counters


def _net_counters() -> dict[str, tuple[int, int]]:
    try:
        return interface_bytes(Path("/proc/net/dev").read_text())
    except (OSError, ValueError):
        return {}


def link_bytes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]],
               only: str | None) -> tuple[list[str], int, int]:
    """(interfaces counted, bytes received, bytes sent) between two readings: those ``only`` (a
    comma list, as GLOO_SOCKET_IFNAME) names, else all, in both readings and not reset."""
    names = sorted(set(before) & set(after))
    if only:
        wanted = {n.strip() for n in only.split(",") if n.strip()}
        names = [n for n in names if n in wanted]
    names = [n for n in names if after[n][0] >= before[n][0] and after[n][1] >= before[n][1]]
    return (names, sum(after[n][0] - before[n][0] for n in names),
            sum(after[n][1] - before[n][1] for n in names))


def storage_bytes(tensors: Iterable[Any]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (a DTensor by its local shard)."""
    seen: dict[int, int] = {}
    for t in tensors:
        local = t.to_local() if hasattr(t, "to_local") else t
        storage = local.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def _layers(width: int, depth: int) -> list[nn.Module]:
    layers: list[nn.Module] = []
    for index in range(depth):
        layers.append(nn.Linear(width, width))
        if index < depth - 1:
            layers.append(nn.ReLU())
    return layers


def build(strategy: str, width: int, depth: int, device: torch.device, mesh: Any,
          group: Any) -> nn.Module:
    """The MLP under ``strategy``: DDP over ``group``, or ``fully_shard`` on ``mesh`` (built on the
    meta device and materialised shard by shard, so no rank ever holds the whole model)."""
    torch.manual_seed(1234)
    if strategy == "ddp":
        model = nn.Sequential(*_layers(width, depth)).to(device)
        ids = [device.index] if device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, process_group=group, device_ids=ids)
    from torch.distributed.fsdp import fully_shard

    with torch.device("meta"):
        model = nn.Sequential(*_layers(width, depth))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.to_empty(device=device)
    for layer in model:
        if isinstance(layer, nn.Linear):
            layer.reset_parameters()
    return model


def time_allreduce(numel: int, group: Any, device: torch.device, repeats: int = 3) -> float:
    """The slowest rank's median seconds for one all-reduce of ``numel`` fp32 values over
    ``group``, after one untimed: the rate the node's own ranks reach while this phase's load is
    on the machine (on CPU, Gloo over loopback: copies and reductions on the same cores)."""
    buffer = torch.zeros(numel, dtype=torch.float32, device=device)
    times = []
    for index in range(repeats + 1):
        dist.barrier(group=group)
        start = time.perf_counter()
        dist.all_reduce(buffer, group=group)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if index:
            times.append(time.perf_counter() - start)
    slowest = torch.tensor([statistics.median(times)], dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
    return float(slowest.item())


class _Trainer:
    """Training steps of ``model``: Adam, synthetic data per rank; a call is one timed step."""

    def __init__(self, model: nn.Module, width: int, batch: int, device: torch.device) -> None:
        self.model, self.device = model, device
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
        generator = torch.Generator().manual_seed(1000 + dist.get_rank())
        self.x = torch.randn(batch, width, generator=generator).to(device)
        self.y = torch.randn(batch, width, generator=generator).to(device)
        self.loss: torch.Tensor | None = None
        self.optimizer_s: list[float] = []  # the optimizer step of each call, apart

    def __call__(self) -> float:
        start = time.perf_counter()
        loss = nn.functional.mse_loss(self.model(self.x), self.y)
        loss.backward()  # type: ignore[no-untyped-call]
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        begun = time.perf_counter()
        self.optimizer.step()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.optimizer_s.append(time.perf_counter() - begun)
        self.optimizer.zero_grad(set_to_none=False)  # gradients stay allocated, as between steps
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.loss = loss.detach()
        return time.perf_counter() - start


def time_phase(args: argparse.Namespace, model_of: Any, device: torch.device, width: int,
               leader: bool, intra: tuple[Any, int] | None = None,
               reference_of: Any = None) -> dict[str, Any]:
    """This rank's measurements of one phase; ``model_of()`` builds the model; ``intra`` (the
    node's own ranks and the parameter count, in the one-node phases) also times an all-reduce of
    the gradients' size over those ranks; ``reference_of()`` (the all-nodes phase) builds the
    one-node model too, whose steps then alternate with the timed ones, so that both see the same
    load on the machine (its memory after the peak is read)."""
    gc.collect()
    dist.barrier()
    reset = reset_peak_rss()
    base_kib = _status_kib("VmRSS")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    model = model_of()
    step = _Trainer(model, width, args.batch, device)
    for _ in range(args.warmup):
        step()
    peak_kib = _status_kib("VmHWM")
    cuda_peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    reference = None
    if reference_of is not None:
        reference = _Trainer(reference_of(), width, args.batch, device)
        for _ in range(args.warmup):
            reference()
    dist.barrier()
    before = _net_counters() if leader else {}
    step.optimizer_s.clear()
    if reference is not None:
        reference.optimizer_s.clear()
    times, reference_times = [], []
    for _ in range(args.steps):
        times.append(step())
        if reference is not None:  # its traffic stays on the node (lo): the counters are the link's
            reference_times.append(reference())
    after = _net_counters() if leader else {}
    if reference is None:
        peak_kib = _status_kib("VmHWM")
        cuda_peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    state = [t for s in step.optimizer.state.values() for t in s.values() if torch.is_tensor(t)]
    loss = float(step.loss) if step.loss is not None else float("nan")
    link = None
    names, rx, tx = link_bytes(before, after, os.environ.get("GLOO_SOCKET_IFNAME"))
    if names:
        link = {"interfaces": names, "rx_bytes_per_step": rx / args.steps,
                "tx_bytes_per_step": tx / args.steps}
    result = {
        "rank": dist.get_rank(), "step_s": statistics.median(times), "steps_s": times,
        "weights": storage_bytes(model.parameters()),
        "gradients": storage_bytes(p.grad for p in model.parameters() if p.grad is not None),
        "optimizer": storage_bytes(state),
        "peak_rss_delta": (peak_kib - base_kib) * 1024 if reset and peak_kib and base_kib else None,
        "cuda_peak": cuda_peak, "final_loss": loss, "link": link,
    }
    result["optimizer_s"] = statistics.median(step.optimizer_s)
    if reference is not None and reference_times:
        result["one_node_step_s"] = statistics.median(reference_times)
        result["one_node_optimizer_s"] = statistics.median(reference.optimizer_s)
    if intra is not None and dist.get_world_size(intra[0]) > 1:
        # after the timed steps, the memory peak and the link counters: it changes none of them
        group, numel = intra
        result["intra_allreduce"] = {"bytes": numel * 4,
                                     "seconds": time_allreduce(numel, group, device)}
    return result


def summarise(per_rank: list[dict[str, Any]], node_of: list[int], ranks: int) -> dict[str, Any]:
    """One phase over every rank (of every node running it at once)."""
    problems = sorted({f"rank {r['rank']}: loss is not finite" for r in per_rank
                       if r["final_loss"] != r["final_loss"] or abs(r["final_loss"]) == float("inf")})
    states = [r["weights"] + r["gradients"] + r["optimizer"] for r in per_rank]
    peaks = [r["peak_rss_delta"] for r in per_rank if r["peak_rss_delta"] is not None]
    cuda = [r["cuda_peak"] for r in per_rank if r["cuda_peak"] is not None]
    links = {node_of[r["rank"]]: r["link"] for r in per_rank if r["link"] is not None}
    intra = [r["intra_allreduce"] for r in per_rank if r.get("intra_allreduce")]
    reference = [r["one_node_step_s"] for r in per_rank if r.get("one_node_step_s")]
    optimizer = [r["optimizer_s"] for r in per_rank if r.get("optimizer_s") is not None]
    optimizer_one = [r["one_node_optimizer_s"] for r in per_rank if r.get("one_node_optimizer_s")]
    return {
        "ranks": ranks, "step_s": max(r["step_s"] for r in per_rank),
        "state_bytes": max(states), "peak_rss_delta": max(peaks) if peaks else None,
        "cuda_peak": max(cuda) if cuda else None,
        "link": [{"node": node, **links[node]} for node in sorted(links)],
        "per_rank": per_rank, "ok": not problems, "problems": problems,
        # the slowest node's all-reduce of the gradients' size over its own ranks (one-node phases)
        "intra_allreduce": max(intra, key=lambda r: r["seconds"]) if intra else None,
        # the all-nodes phase: the one-node steps that alternated with its own (slowest rank)
        "one_node_step_s": max(reference) if reference else None,
        # the optimizer step alone, part of the steps above (the slowest rank's median): it runs
        # over the rank's shard, which FSDP halves from one node to two
        "optimizer_s": max(optimizer) if optimizer else None,
        "one_node_optimizer_s": max(optimizer_one) if optimizer_one else None,
    }


class Stage:
    def __init__(self, out: Path | None) -> None:
        self.out = out if dist.get_rank() == 0 else None

    def __call__(self, text: str) -> None:
        if self.out is not None:
            replace_file(f"{self.out}.stage", f"{text}\n")

    def save(self, doc: dict[str, Any]) -> None:
        if self.out is not None:
            replace_file(self.out, json.dumps(doc, indent=2) + "\n")


def run(args: argparse.Namespace, doc: dict[str, Any], device: torch.device,
        stage: Stage) -> None:
    """Every phase, filling ``doc`` (saved after each, so a failure later keeps what was measured)."""
    from torch.distributed.device_mesh import init_device_mesh

    rank, world = dist.get_rank(), dist.get_world_size()
    width, depth = mlp_shape(args.params)
    params = depth * (width * width + width)
    doc["model"] = {"kind": "mlp", "width": width, "depth": depth, "params": params, "dtype": "fp32",
                    "optimizer": "adam", "batch_per_rank": args.batch}
    node_of = [int(n) for n in all_gather_json(int(os.environ.get("GROUP_RANK", "0")))]
    nodes = len(set(node_of))
    per_node = world // nodes
    if world % nodes or node_of != [r // per_node for r in range(world)]:
        raise RuntimeError(f"ranks are not numbered node by node with equal counts: {node_of}")
    doc.update(nodes=nodes, ranks_per_node=per_node)
    stage.save(doc)
    mesh = init_device_mesh(device.type, (nodes, per_node), mesh_dim_names=("node", "local"))
    local = mesh["local"]
    leader = rank % per_node == 0
    one_node = ("one_node", local, local.get_group(), per_node)
    phases: list[tuple[str, Any, Any, int]] = [one_node]
    if nodes > 1:
        whole = (mesh if args.strategy == "hsdp" else
                 init_device_mesh(device.type, (world,), mesh_dim_names=("all",)))
        # the 1-node steps again, alternating with the all-nodes ones: both see the same load on
        # the machine, so the comparison holds when other work slows the box down meanwhile
        phases.append(("all_nodes", whole, None, world))
    local_strategy = "fsdp" if args.strategy == "hsdp" else args.strategy  # FSDP over one node

    def one_node_model() -> nn.Module:
        return build(local_strategy, width, depth, device, local, local.get_group())

    for name, phase_mesh, group, ranks in phases:
        stage(f"{name}: {args.warmup} warm-up + {args.steps} timed steps")
        strategy = args.strategy if name == "all_nodes" else local_strategy

        def model_of(s: str = strategy, m: Any = phase_mesh, g: Any = group) -> nn.Module:
            return build(s, width, depth, device, m, g)

        mine = (time_phase(args, model_of, device, width, leader, reference_of=one_node_model)
                if name == "all_nodes" else
                time_phase(args, model_of, device, width, leader, (local.get_group(), params)))
        doc["phases"][name] = summarise(all_gather_json(mine), node_of, ranks)
        stage.save(doc)
    doc["ok"] = all(p["ok"] for p in doc["phases"].values())


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ddpkit.workers.strategies",
                                description="DDP / FSDP / HSDP steps: one node vs all nodes")
    p.add_argument("--strategy", choices=STRATEGIES, required=True)
    p.add_argument("--params", type=int, default=25_000_000)
    p.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    p.add_argument("--timeout", type=float, default=120.0, help="process group timeout (s)")
    p.add_argument("--out", type=Path, default=None, help="JSON results (written by rank 0)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.params < 1 or args.batch < 1 or args.steps < 1 or args.warmup < 0:
        parser.error("need --params, --batch, --steps >= 1 and --warmup >= 0")
    backend, device = backend_and_device(args.backend)
    with process_group(backend, args.timeout):
        stage = Stage(args.out)
        doc: dict[str, Any] = {
            "schema": SCHEMA, "strategy": args.strategy, "ok": False, "backend": backend,
            "device": device.type, "world_size": dist.get_world_size(),
            "torch_version": torch.__version__, "warmup_steps": args.warmup,
            "timed_steps": args.steps, "phases": {}}
        try:
            run(args, doc, device, stage)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            doc.update(ok=False, error=f"{type(exc).__name__}: {first}")
            stage.save(doc)
            stage("failed")
            sys.stderr.write(traceback.format_exc())
            return 1
        stage.save(doc)
        stage("done")
        if dist.get_rank() == 0:
            lines = [f"# {args.strategy}, {name.replace('_', ' ')}: {p['step_s'] * 1e3:.1f} ms/step, "
                     f"state {p['state_bytes'] / 1e6:.1f} MB/rank"
                     for name, p in doc["phases"].items()]
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()
    return 0 if doc["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
