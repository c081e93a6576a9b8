"""Collective bandwidth sweep in the manner of nccl-tests, run inside ranks under torchrun.

    torchrun --nnodes N --nproc-per-node G ... -m ddpkit.workers.collectives \\
        -b 1K -e 256M -f 2 -w 5 -n 20 --out results.json

Every rank reads its rank and rendezvous from the environment (``init_process_group("env://")``).
For each collective (all_reduce, all_gather, reduce_scatter, broadcast, all_to_all) and each size it
runs warm-up iterations, times ``-n`` iterations (time = mean over ranks, as nccl-tests), computes
algbw and busbw with nccl-tests' factors (:mod:`ddpkit.bench.formulas`), then re-fills the buffers
with values whose result is exact and counts wrong elements over all ranks. A collective the backend
lacks is detected with a tiny probe and skipped with a note. Rank 0 prints nccl-tests-style columns
and "Avg bus bandwidth", and writes one ``ddpkit.collectives/1`` JSON document to ``--out``
(atomically). Exit status: 0 all correct, 1 some element wrong, 2 bad arguments or output path.

With ``--tcp-out FILE`` the job first measures raw TCP throughput between every node pair
(:mod:`ddpkit.workers.tcp_baseline`, flags ``--tcp-seconds``, ``--tcp-streams``, ``--tcp-max-bytes``),
so ``ddpkit bench`` gets the wire's rate and the busbw in one job.

Only the standard library, torch, the stdlib-only ``ddpkit.bench.formulas`` and the baseline
worker (stdlib, torch and the stdlib-only ``ddpkit.bench.tcp``) are imported.
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from ddpkit.bench.formulas import GB, busbw_factor, element_count, parse_sweep_size, sweep_sizes
from ddpkit.workers import tcp_baseline
from ddpkit.workers.json_collective import all_gather_json

SCHEMA = "ddpkit.collectives/1"
OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
# name -> (torch dtype, nccl-tests type name)
DTYPES: dict[str, tuple[torch.dtype, str]] = {
    "float32": (torch.float32, "float"),
    "float64": (torch.float64, "double"),
    "float16": (torch.float16, "half"),
    "bfloat16": (torch.bfloat16, "bfloat16"),
    "int32": (torch.int32, "int32"),
}
_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "bf16": "bfloat16",
            "fp32": "float32", "fp16": "float16", "int": "int32"}


def _size(text: str) -> int:
    try:
        return parse_sweep_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ddpkit.workers.collectives",
                                description="nccl-tests-style collective sweep (run under torchrun)")
    p.add_argument("-b", "--min-bytes", "--minbytes", type=_size, default=_size("1K"))
    p.add_argument("-e", "--max-bytes", "--maxbytes", type=_size, default=_size("64M"))
    p.add_argument("-f", "--step-factor", "--stepfactor", type=int, default=2)
    p.add_argument("-i", "--step-bytes", "--stepbytes", type=_size, default=None)
    p.add_argument("-w", "--warmup-iters", type=int, default=5)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-c", "--check", type=int, choices=(0, 1), default=1)
    p.add_argument("-d", "--datatype", default="float32")
    p.add_argument("--ops", default=",".join(OPS), help=f"comma list of {', '.join(OPS)}")
    p.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    p.add_argument("--timeout", type=float, default=300.0, help="process group timeout (s)")
    p.add_argument("--out", type=Path, default=None, help="JSON results path (written by rank 0)")
    p.add_argument("--tcp-out", type=Path, default=None,
                   help="first measure raw TCP between every node pair (ddpkit.workers.tcp_baseline) "
                        "in the same job and write it here")
    tcp_baseline.add_arguments(p, prefix="tcp-")
    return p


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.datatype = _ALIASES.get(args.datatype, args.datatype)
    if args.datatype not in DTYPES:
        parser.error(f"unknown datatype {args.datatype!r}; choose from {', '.join(DTYPES)}")
    args.ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    unknown = sorted(set(args.ops) - set(OPS))
    if unknown or not args.ops:
        parser.error(f"unknown collective(s) {', '.join(unknown) or '(none given)'}; "
                     f"choose from {', '.join(OPS)}")
    if args.warmup_iters < 0 or args.iters < 1:
        parser.error("need --warmup-iters >= 0 and --iters >= 1")
    try:
        args.sizes = sweep_sizes(args.min_bytes, args.max_bytes, args.step_factor, args.step_bytes)
    except ValueError as exc:
        parser.error(str(exc))
    return args


# --- buffers whose expected results are exact (small integers) -------------------------------

def _pattern(count: int, device: torch.device) -> torch.Tensor:
    return torch.arange(count, device=device, dtype=torch.float64).remainder(8)


def _inputs(op: str, count: int, rank: int, n: int, device: torch.device,
            dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(send, receive, expected receive) for one correctness check of ``op`` on ``count`` elements."""
    chunk = count // n if op in ("all_gather", "reduce_scatter", "all_to_all") else count
    i = _pattern(chunk, device)
    if op == "all_reduce":
        send = (i + rank + 1).to(dtype)
        return send, send, i * n + n * (n + 1) / 2
    if op == "broadcast":
        buffer = ((i + 1) if rank == 0 else torch.full_like(i, -1.0)).to(dtype)
        return buffer, buffer, i + 1
    if op == "all_gather":
        send = (i * n + rank + 1).to(dtype)
        expected = torch.cat([i * n + src + 1 for src in range(n)])
        return send, torch.empty(count, device=device, dtype=dtype), expected
    if op == "reduce_scatter":
        send = torch.cat([i + rank + 1 + dst for dst in range(n)]).to(dtype)
        expected = i * n + n * (n + 1) / 2 + n * rank
        return send, torch.empty(chunk, device=device, dtype=dtype), expected
    # all_to_all: chunk for rank dst from rank src holds (i % 4) * n^2 + src * n + dst + 1
    small = i.remainder(4) * n * n
    send = torch.cat([small + rank * n + dst + 1 for dst in range(n)]).to(dtype)
    expected = torch.cat([small + src * n + rank + 1 for src in range(n)])
    return send, torch.empty(count, device=device, dtype=dtype), expected


# torch 2.13 renamed the flat-tensor forms (the old names warn); older torch has only the old ones.
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def _run(op: str, send: torch.Tensor, recv: torch.Tensor) -> None:
    if op == "all_reduce":
        dist.all_reduce(send)
    elif op == "broadcast":
        dist.broadcast(send, src=0)
    elif op == "all_gather":
        _ALL_GATHER(recv, send)
    elif op == "reduce_scatter":
        _REDUCE_SCATTER(recv, send)
    else:
        dist.all_to_all_single(recv, send)


def _timing_buffers(op: str, count: int, n: int, device: torch.device,
                    dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    # Zeros: repeated in-place sums stay finite however many iterations run.
    send_count = count // n if op == "all_gather" else count
    recv_count = count // n if op == "reduce_scatter" else count
    send = torch.zeros(send_count, device=device, dtype=dtype)
    recv = send if op in ("all_reduce", "broadcast") else torch.zeros(
        recv_count, device=device, dtype=dtype)
    return send, recv


def _wrong(result: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> int:
    got = result.to(torch.float64)
    if dtype in (torch.float16, torch.bfloat16):  # 16-bit sums round: nccl-tests also tolerates
        tolerance = expected.abs() * (2.0**-7 if dtype == torch.bfloat16 else 2.0**-10) * 2
    else:
        tolerance = torch.zeros_like(expected)
    return int(((got - expected).abs() > tolerance).sum().item())


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _mean_over_ranks(value: float, device: torch.device) -> float:
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return float(t.item()) / dist.get_world_size()


def _sum_over_ranks(value: int, device: torch.device) -> int:
    t = torch.tensor([value], dtype=torch.int64, device=device)
    dist.all_reduce(t)
    return int(t.item())


def probe(op: str, n: int, device: torch.device, dtype: torch.dtype) -> str | None:
    """None if the backend runs ``op``, else why not (all ranks agree)."""
    note = None
    try:
        send, recv = _timing_buffers(op, 4 * n, n, device, dtype)
        _run(op, send, recv)
    except (RuntimeError, NotImplementedError, ValueError, TypeError) as exc:
        note = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip()
    unsupported = _sum_over_ranks(0 if note is None else 1, device)
    return None if unsupported == 0 else (note or "unsupported on another rank")


def measure(op: str, size: int, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    rank, n = dist.get_rank(), dist.get_world_size()
    dtype, type_name = DTYPES[args.datatype]
    elem = torch.empty((), dtype=dtype).element_size()
    count = element_count(op, size, elem, n)
    send, recv = _timing_buffers(op, count, n, device, dtype)
    for _ in range(args.warmup_iters):
        _run(op, send, recv)
    _sync(device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.iters):
        _run(op, send, recv)
    _sync(device)
    seconds = _mean_over_ranks((time.perf_counter() - start) / args.iters, device)
    wrong = 0
    if args.check:
        check_send, check_recv, expected = _inputs(op, count, rank, n, device, dtype)
        _run(op, check_send, check_recv)
        _sync(device)
        wrong = _sum_over_ranks(_wrong(check_recv, expected, dtype), device)
    nbytes = count * elem
    algbw = nbytes / seconds
    return {"bytes": nbytes, "count": count, "dtype": type_name, "time_us": seconds * 1e6,
            "algbw": algbw, "busbw": algbw * busbw_factor(op, n), "wrong": wrong if args.check
            else None}


# --- output (rank 0) ---------------------------------------------------------------------------

_HEAD = ("#       size         count      type   redop    root     time   algbw   busbw  #wrong\n"
         "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)")


def _row(op: str, r: dict[str, Any]) -> str:
    redop = "sum" if op in ("all_reduce", "reduce_scatter") else "none"
    root = 0 if op == "broadcast" else -1
    wrong = "N/A" if r["wrong"] is None else str(r["wrong"])
    return (f"{r['bytes']:12d}  {r['count']:12d}  {r['dtype']:>8s}  {redop:>6s}  {root:6d}  "
            f"{r['time_us']:7.1f}  {r['algbw'] / GB:6.2f}  {r['busbw'] / GB:6.2f}  {wrong:>6s}")


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _out_problem(path: Path | None) -> str | None:
    if path is None:
        return None
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        return f"--out {path}: directory {parent} does not exist"
    if not os.access(parent, os.W_OK):
        return f"--out {path}: directory {parent} is not writable"
    if path.is_dir():
        return f"--out {path} is a directory"
    return None


@record
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method="env://",
                            timeout=datetime.timedelta(seconds=args.timeout))
    try:
        if args.tcp_out is not None:
            doc = tcp_baseline.run_baseline(seconds=args.tcp_seconds, streams=args.tcp_streams,
                                            max_bytes=args.tcp_max_bytes)
            if doc:
                tcp_baseline.write_json(args.tcp_out, doc)
        return _sweep(args, backend, device)
    finally:
        dist.destroy_process_group()


def _sweep(args: argparse.Namespace, backend: str, device: torch.device) -> int:
    rank, n = dist.get_rank(), dist.get_world_size()
    problem = _out_problem(args.out) if rank == 0 else None
    if _sum_over_ranks(0 if problem is None else 1, device):  # every rank stops together
        if problem:
            sys.stderr.write(f"error: {problem}\n")
        return 2
    hosts: list[Any] = all_gather_json(socket.gethostname(), device)
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if rank == 0:
        _say(f"# ddpkit collectives: backend {backend}, {n} ranks on {len(set(hosts))} host(s), "
             f"dtype {args.datatype}, warmup {args.warmup_iters}, iters {args.iters}, "
             f"check {args.check}")
    ops = []
    for op in args.ops:
        note = probe(op, n, device, DTYPES[args.datatype][0])
        entry: dict[str, Any] = {"op": op, "supported": note is None, "note": note,
                                 "busbw_factor": busbw_factor(op, n), "results": []}
        if note is not None:
            if rank == 0:
                _say(f"#\n# {op}: skipped ({note})")
            ops.append(entry)
            continue
        if rank == 0:
            _say(f"#\n# {op}\n{_HEAD}")
        for size in args.sizes:
            if element_count(op, size, torch.empty((), dtype=DTYPES[args.datatype][0])
                             .element_size(), n) == 0:
                continue
            result = measure(op, size, args, device)
            entry["results"].append(result)
            if rank == 0:
                _say(_row(op, result))
        rows = entry["results"]
        entry["avg_busbw"] = sum(r["busbw"] for r in rows) / len(rows) if rows else None
        if rank == 0 and rows:
            _say(f"# Avg bus bandwidth    : {entry['avg_busbw'] / GB:.4f} GB/s ({op})")
        ops.append(entry)
    all_rows = [r for entry in ops for r in entry["results"]]
    wrong_total = sum(r["wrong"] or 0 for r in all_rows)
    if rank == 0:
        avg = sum(r["busbw"] for r in all_rows) / len(all_rows) if all_rows else 0.0
        _say(f"#\n# Out of bounds values : {wrong_total} {'OK' if wrong_total == 0 else 'FAILED'}")
        _say(f"# Avg bus bandwidth    : {avg / GB:.4f} GB/s (all collectives)")
        if args.out is not None:
            tcp_baseline.write_json(args.out, {
                "schema": SCHEMA, "backend": backend, "world_size": n,
                "local_world_size": local_world, "hosts": sorted(set(hosts)),
                "torch_version": torch.__version__, "dtype": args.datatype,
                "warmup_iters": args.warmup_iters, "iters": args.iters, "check": bool(args.check),
                "sizes": {"min_bytes": args.min_bytes, "max_bytes": args.max_bytes,
                          "step_factor": args.step_factor, "step_bytes": args.step_bytes},
                "units": {"bytes": "bytes", "time_us": "microseconds, mean over ranks",
                          "algbw": "bytes/s", "busbw": "bytes/s"},
                "ops": ops, "wrong_total": wrong_total, "avg_busbw": avg,
            })
    return 0 if wrong_total == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
