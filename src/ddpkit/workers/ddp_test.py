"""The cluster test program, run in every rank by `ddpkit test` through `ddpkit launch`.

Standard library and torch only. Each rank records checks as data; at the end the results are
exchanged with torch's own collectives (JSON bytes in a uint8 tensor, :mod:`.json_collective`), and
local rank 0 of every node writes the whole job's report. A rank also keeps its current stage in a
small file, so a hang can be named from outside.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import gc
import json
import os
import socket
import struct
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ddpkit.atomic_file import replace_file

SCHEMA = "ddpkit.test-report/1"
SIOCGIFADDR = 0x8915


class RankRun:
    def __init__(self, report_dir: Path) -> None:
        self.rank = int(os.environ["RANK"])
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.world_size = int(os.environ["WORLD_SIZE"])
        self.local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        self.report_dir = report_dir
        self.checks: list[dict[str, Any]] = []
        self.info: dict[str, Any] = {
            "rank": self.rank,
            "local_rank": self.local_rank,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "node_rank": int(os.environ.get("GROUP_RANK", "0")),
        }
        self.bandwidth: list[dict[str, Any]] = []

    def stage(self, name: str) -> None:
        replace_file(self.report_dir / f"rank{self.rank}.stage", f"{name} {time.time():.3f}\n")

    @contextlib.contextmanager
    def check(self, name: str) -> Iterator[dict[str, Any]]:
        """Record one check; an exception inside marks it failed and propagates."""
        self.stage(name)
        entry: dict[str, Any] = {"name": name, "ok": True, "detail": ""}
        start = time.perf_counter()
        try:
            yield entry
        except Exception as exc:
            entry["ok"] = False
            entry["detail"] = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            entry["seconds"] = round(time.perf_counter() - start, 4)
            self.checks.append(entry)

    def to_dict(self) -> dict[str, Any]:
        return {**self.info, "checks": self.checks, "bandwidth": self.bandwidth}


def interface_address(ifname: str) -> str | None:
    """IPv4 address of ``ifname`` (SIOCGIFADDR), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            packed = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, struct.pack("256s", ifname[:15].encode()))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def connected_local_addresses() -> list[str]:
    """The local addresses of this process's established TCP connections (what it really uses)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found: set[str] = set()
    for table, width in (("/proc/self/net/tcp", 8), ("/proc/self/net/tcp6", 32)):
        with contextlib.suppress(OSError):
            for row in Path(table).read_text().splitlines()[1:]:
                cols = row.split()
                if len(cols) < 10 or cols[3] != "01" or cols[9] not in inodes:  # 01 = ESTABLISHED
                    continue
                found.add(_decode_address(cols[1].split(":")[0], width))
    return sorted(a for a in found if a)


def _decode_address(hex_address: str, width: int) -> str:
    raw = bytes.fromhex(hex_address)
    if width == 8:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    text = socket.inet_ntop(socket.AF_INET6, words)
    return text[7:] if text.startswith("::ffff:") else text


def address_to_interface(address: str) -> str | None:
    for _, name in socket.if_nameindex():
        if interface_address(name) == address:
            return name
    return None


def run_checks(run: RankRun, args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(run.local_rank)
        device = torch.device("cuda", run.local_rank)
        run.info["device"] = f"cuda:{run.local_rank} ({torch.cuda.get_device_name(device)})"
    else:
        device = torch.device("cpu")
        run.info["device"] = "cpu"
    run.info["backend"] = backend
    run.info["torch"] = torch.__version__
    n = run.world_size

    with run.check("init"):
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=args.timeout))

    with run.check("all_reduce") as entry:
        t = torch.full((1024,), float(run.rank + 1), device=device)
        dist.all_reduce(t)
        expected = n * (n + 1) / 2
        wrong = int((t != expected).sum().item())
        entry["ok"] = wrong == 0
        entry["detail"] = f"sum of 1..{n} = {t[0].item():g}" + (f", {wrong} wrong" if wrong else "")
        entry["say"] = {"id": "sum-wrong" if wrong else "sum", "n": n, "total": t[0].item(),
                        "wrong": wrong}

    with run.check("interface") as entry:
        used = [a for a in connected_local_addresses() if not a.startswith("127.") and a != "::1"]
        names = sorted({address_to_interface(a) or "?" for a in used})
        run.info["addresses_used"] = used
        run.info["interfaces_used"] = names
        configured = os.environ.get("GLOO_SOCKET_IFNAME") if backend == "gloo" else \
            os.environ.get("NCCL_SOCKET_IFNAME")
        run.info["interface_configured"] = configured
        entry["detail"] = f"{', '.join(names) or 'loopback'} {' '.join(used)}".strip()
        if configured and used:
            wanted = configured.lstrip("=").split(",")
            entry["ok"] = all(any(name == w or name.startswith(w) for w in wanted) for name in names)

    with run.check("broadcast") as entry:
        t = torch.arange(4096, dtype=torch.float32, device=device) + 42 if run.rank == 0 else \
            torch.zeros(4096, dtype=torch.float32, device=device)
        dist.broadcast(t, src=0)
        expected_t = torch.arange(4096, dtype=torch.float32, device=device) + 42
        entry["ok"] = bool(torch.equal(t, expected_t))
        entry["detail"] = "4096 floats from rank 0" + ("" if entry["ok"] else ": mismatch")
        entry["say"] = {"id": "broadcast" if entry["ok"] else "broadcast-mismatch"}

    with run.check("all_gather") as entry:
        mine = torch.full((16,), float(run.rank), device=device)
        parts = [torch.empty_like(mine) for _ in range(n)]
        dist.all_gather(parts, mine)
        entry["ok"] = all(bool((p == r).all()) for r, p in enumerate(parts))
        entry["detail"] = f"{n} parts" + ("" if entry["ok"] else ": mismatch")
        entry["say"] = {"id": "parts" if entry["ok"] else "parts-mismatch", "n": n}

    with run.check("barrier"):
        dist.barrier()

    with run.check("ddp") as entry:
        entry.update(_ddp_steps(run, device, args.steps))

    with run.check("bandwidth") as entry:
        for size in args.sizes:
            run.bandwidth.append(_time_all_reduce(size, device, n, args.iters))
        best = run.bandwidth[-1] if run.bandwidth else None
        if best:
            entry["detail"] = f"busbw {best['busbw_gbps']:.3f} GB/s at {_size_text(best['bytes'])}"
            entry["say"] = {"id": "busbw", "busbw": best["busbw_gbps"],
                            "size": _size_text(best["bytes"])}


def _ddp_steps(run: RankRun, device: Any, steps: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    model.to(device)
    initial = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    ddp = DistributedDataParallel(model, device_ids=[run.local_rank] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(1000 + run.rank)  # different data on every rank
    for _ in range(steps):
        x = torch.randn(16, 32, generator=generator).to(device)
        y = torch.randn(16, 8, generator=generator).to(device)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    identical = bool(torch.equal(flat, reference))
    moved = not bool(torch.equal(flat, initial))
    return {
        "ok": identical and moved,
        "detail": f"{steps} steps, {flat.numel()} params "
                  + ("bit-identical across ranks" if identical else "DIFFER from rank 0")
                  + ("" if moved else ", but parameters never changed"),
        # the same words by id, so the CLI can show them in the user's language (issue 35)
        "say": {"id": ("ddp" if identical else "ddp-differ") + ("" if moved else "-still"),
                "steps": steps, "params": flat.numel()},
    }


def _time_all_reduce(size: int, device: Any, n: int, iters: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    count = max(1, size // 4)
    t = torch.ones(count, dtype=torch.float32, device=device)
    dist.all_reduce(t)  # warm-up
    dist.barrier()
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / iters
    algbw = count * 4 / seconds
    factor = 2 * (n - 1) / n if n > 1 else 1.0
    return {"bytes": count * 4, "time_us": round(seconds * 1e6, 1),
            "algbw_gbps": round(algbw / 1e9, 4), "busbw_gbps": round(algbw * factor / 1e9, 4)}


def exchange_reports(run: RankRun, device: Any) -> list[dict[str, Any]]:
    """Every rank's report, on every rank, through all_gather of JSON bytes."""
    from ddpkit.workers.json_collective import all_gather_json

    return sorted(all_gather_json(run.to_dict(), device), key=lambda r: r["rank"])


def _size_text(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def _sizes(text: str) -> list[int]:
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    sizes = []
    for item in text.split(","):
        item = item.strip().upper().removesuffix("IB").removesuffix("B")
        mult = scale.get(item[-1:], 1)
        sizes.append(int(float(item.rstrip("KMG")) * mult))
    return sizes


def write_json(path: Path, doc: dict[str, Any]) -> None:
    replace_file(path, json.dumps(doc, indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ddpkit.workers.ddp_test")
    parser.add_argument("--report-dir", required=True, type=Path)
    parser.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
    parser.add_argument("--sizes", type=_sizes, default=_sizes("1M,4M,16M,64M"))
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="process-group timeout (seconds)")
    args = parser.parse_args(argv)
    args.report_dir.mkdir(parents=True, exist_ok=True)
    run = RankRun(args.report_dir)
    failed_with: str | None = None
    try:
        run_checks(run, args)
    except Exception:
        failed_with = traceback.format_exc()
        run.info["error"] = failed_with.strip().splitlines()[-1]
    write_json(args.report_dir / f"rank{run.rank}.json", {"schema": SCHEMA, **run.to_dict()})
    if failed_with is not None:
        run.stage("failed")
        sys.stderr.write(failed_with)
        return 1
    import torch
    import torch.distributed as dist

    run.stage("exchange")
    device = torch.device("cuda", run.local_rank) if run.info["backend"] == "nccl" else \
        torch.device("cpu")
    reports = exchange_reports(run, device)
    ok = all(c["ok"] for r in reports for c in r["checks"])
    if run.local_rank == 0:
        write_json(args.report_dir / "report.json", {
            "schema": SCHEMA,
            "world_size": run.world_size,
            "nodes": run.world_size // max(1, run.local_world_size),
            "ranks_per_node": run.local_world_size,
            "ok": ok,
            "ranks": reports,
        })
    run.stage("done")
    gc.collect()  # nothing of Gloo's may be left for interpreter exit (see launch/torchrun/tracebacks.py)
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
