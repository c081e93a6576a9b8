"""Values exchanged between ranks as JSON bytes in a uint8 tensor: the one encoding workers use.

torch's object collectives serialise with Python's own object format (and call
``tensor.numpy()``, so they need numpy); these use neither. Every rank must make the same calls in
the same order, as with any torch collective.
"""

from __future__ import annotations

import json
from typing import Any

import torch
import torch.distributed as dist


def _default_device() -> torch.device:
    """Where the backend wants tensors: the current CUDA device on NCCL, the CPU otherwise."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def encode(value: Any) -> bytes:
    """The wire form of one value (compact JSON, UTF-8); raises TypeError for what JSON cannot hold."""
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def decode(raw: bytes) -> Any:
    return json.loads(raw.decode("utf-8"))


def all_gather_json(value: Any, device: torch.device | None = None, group: Any = None) -> list[Any]:
    """Every rank's ``value``, in rank order (within ``group``), on every rank."""
    device = device or _default_device()
    world = dist.get_world_size(group)
    payload = encode(value)
    length = torch.tensor([len(payload)], dtype=torch.int64, device=device)
    lengths = [torch.zeros_like(length) for _ in range(world)]
    dist.all_gather(lengths, length, group=group)
    sizes = [int(x.item()) for x in lengths]
    mine = torch.zeros(max(sizes), dtype=torch.uint8, device=device)
    if payload:
        mine[: len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8).to(device)
    parts = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(parts, mine, group=group)
    return [decode(bytes(part[:size].cpu().tolist())) for part, size in zip(parts, sizes)]


def broadcast_json(value: Any, src: int = 0, device: torch.device | None = None) -> Any:
    """Rank ``src``'s ``value`` on every rank (other ranks' ``value`` is ignored)."""
    device = device or _default_device()
    payload = encode(value) if dist.get_rank() == src else b""
    length = torch.tensor([len(payload)], dtype=torch.int64, device=device)
    dist.broadcast(length, src)
    buffer = torch.zeros(int(length.item()), dtype=torch.uint8, device=device)
    if payload:
        buffer[:] = torch.frombuffer(bytearray(payload), dtype=torch.uint8).to(device)
    dist.broadcast(buffer, src)
    return decode(bytes(buffer.cpu().tolist()))
