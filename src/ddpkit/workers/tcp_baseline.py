"""Raw TCP throughput between every pair of nodes, measured inside a torchrun job.

    torchrun ... -m ddpkit.workers.tcp_baseline --out tcp.json [--seconds 2] [--streams 1,4]

or, in the same job as the collective sweep, ``-m ddpkit.workers.collectives ... --tcp-out tcp.json``.

Local rank 0 of every node listens on the address this node uses for the job (the interface in
``GLOO_SOCKET_IFNAME``/``NCCL_SOCKET_IFNAME`` that ``ddpkit launch`` set, else the source address of
the route to ``MASTER_ADDR``) on an ephemeral port; the addresses and ports travel through torch's
own collectives (JSON bytes, :mod:`ddpkit.workers.json_collective`), then the nodes take turns as
senders in rounds of disjoint pairs (:func:`ddpkit.bench.tcp.pair_rounds`), one barrier between
turns. Each turn is bounded in time and bytes. The kernel's link speed
(``/sys/class/net/<if>/speed``) is recorded where it is known.
Rank 0 writes one ``ddpkit.tcp-baseline/1`` document.

Only the standard library, torch and the stdlib-only :mod:`ddpkit.bench.tcp` are imported.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import json
import os
import socket
import struct
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ddpkit.atomic_file import replace_file
from ddpkit.bench import tcp
from ddpkit.workers.json_collective import all_gather_json

SCHEMA = "ddpkit.tcp-baseline/1"
SIOCGIFADDR = 0x8915
DEFAULT_STREAMS = (1, 4)


def interface_address(ifname: str) -> str | None:
    """IPv4 address of ``ifname`` (SIOCGIFADDR), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            packed = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, struct.pack("256s", ifname[:15].encode()))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def route_source(peer: str) -> str | None:
    """The source address the kernel picks to reach ``peer`` (a UDP connect sends nothing)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect((peer, 9))
            return str(sock.getsockname()[0])
    except OSError:
        return None


def interface_of(address: str) -> str | None:
    for _, name in socket.if_nameindex():
        if interface_address(name) == address:
            return name
    return None


def job_address(env: dict[str, str]) -> tuple[str | None, str]:
    """``(ifname, address)`` this node uses for the job."""
    for key in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        value = env.get(key, "").lstrip("=").split(",")[0].strip()
        if value and not value.startswith("^"):
            address = interface_address(value)
            if address:
                return value, address
    master = env.get("MASTER_ADDR", "127.0.0.1")
    address = route_source(master) or "127.0.0.1"
    return interface_of(address), address


def link_speed_mbps(ifname: str | None) -> int | None:
    """The kernel's link speed in Mbit/s, or None where it does not know (virtual links say -1)."""
    if not ifname:
        return None
    with contextlib.suppress(OSError, ValueError):
        speed = int(Path(f"/sys/class/net/{ifname}/speed").read_text().strip())
        return speed if speed > 0 else None
    return None


def run_baseline(*, seconds: float, streams: list[int], max_bytes: int) -> dict[str, Any]:
    """Measure every ordered node pair; call on every rank of an initialised process group.

    Returns the document on rank 0 (``{}`` elsewhere).
    """
    rank = dist.get_rank()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    node = int(os.environ.get("GROUP_RANK", "0"))
    receiver: tcp.Receiver | None = None
    mine: dict[str, Any] | None = None
    if local_rank == 0:
        ifname, address = job_address(dict(os.environ))
        receiver = tcp.Receiver(address).start()
        mine = {"node": node, "host": socket.gethostname(), "ifname": ifname, "address": address,
                "port": receiver.port, "speed_mbps": link_speed_mbps(ifname)}
    try:
        gathered: list[Any] = all_gather_json(mine)
        nodes = {info["node"]: info for info in gathered if info is not None}
        order = sorted(nodes)
        results: list[dict[str, Any]] = []
        for pairs in tcp.pair_rounds(len(order)):
            for count in streams:
                dist.barrier()
                for src, dst in pairs:
                    if local_rank == 0 and order[src] == node:
                        peer, me = nodes[order[dst]], nodes[order[src]]
                        found = tcp.measure(peer["address"], peer["port"], streams=count,
                                            seconds=seconds, max_bytes=max_bytes,
                                            source=me["address"])
                        results.append({"src": order[src], "dst": order[dst], **found.to_dict()})
        dist.barrier()
        every: list[Any] = all_gather_json(results)
    finally:
        if receiver is not None:
            receiver.close()
    if rank != 0:
        return {}
    pairs_found = sorted((r for part in every for r in part),
                         key=lambda r: (r["src"], r["dst"], r["streams"]))
    return {
        "schema": SCHEMA, "seconds": seconds, "max_bytes": max_bytes, "streams": list(streams),
        "nodes": [{k: v for k, v in nodes[n].items() if k != "port"} for n in order],
        "pairs": pairs_found,
        "note": None if len(order) > 1 else "one node: there is no inter-node link to measure",
    }


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """A result document, written atomically (readers see all of it or nothing)."""
    replace_file(path, json.dumps(doc, indent=2) + "\n")


def parse_streams(text: str) -> list[int]:
    try:
        values = sorted({int(item) for item in text.split(",") if item.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma list of stream counts") from None
    if not values or values[0] < 1 or values[-1] > 64:
        raise argparse.ArgumentTypeError(f"stream counts must be 1..64, got {text!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """The baseline's flags (``prefix`` = ``tcp-`` when another worker hosts them)."""
    parser.add_argument(f"--{prefix}seconds", type=float, default=2.0,
                        help="longest a sender writes per turn (default 2)")
    parser.add_argument(f"--{prefix}streams", type=parse_streams, default=list(DEFAULT_STREAMS),
                        help="stream counts to measure, comma list (default 1,4)")
    parser.add_argument(f"--{prefix}max-bytes", type=int, default=1 << 30,
                        help="most bytes a sender writes per turn (default 1 GiB)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ddpkit.workers.tcp_baseline",
                                     description="raw TCP throughput between every node pair")
    add_arguments(parser)
    parser.add_argument("--out", type=Path, required=True, help="JSON results (written by rank 0)")
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    parser.add_argument("--timeout", type=float, default=300.0, help="process group timeout (s)")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.max_bytes < 64:
        parser.error("need --seconds > 0 and --max-bytes >= 64")
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=args.timeout))
    try:
        doc = run_baseline(seconds=args.seconds, streams=args.streams, max_bytes=args.max_bytes)
        if doc:
            write_json(args.out, doc)
            for row in doc["pairs"]:
                rate = "failed: " + row["error"] if row["bytes_per_s"] is None else \
                    f"{row['bytes_per_s'] * 8 / 1e9:.3f} Gbit/s"
                sys.stdout.write(f"# tcp node {row['src']} -> node {row['dst']}, "
                                 f"{row['streams']} stream(s): {rate}\n")
            sys.stdout.flush()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
