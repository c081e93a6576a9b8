"""Ports for tests to hand to a server they start: never from the kernel's ephemeral range.

A port taken by binding port 0 comes from ``/proc/sys/net/ipv4/ip_local_port_range``, the range the
kernel also gives every outgoing connection its source port from: between the probe and the
server's bind, any connection on the machine (a rank's, another test's) may take it, and the test
fails with "address in use" (issue 31: 6 such failures in one run). These come from below that
range, start at a place of their own per process, are never handed out twice by one process, and
are checked free (bound on every address, without SO_REUSEADDR, so a TIME_WAIT holder counts).
"""

from __future__ import annotations

import itertools
import os
import socket
import threading

LOWEST = 20000  # above the registered ports most services use
_given: set[int] = set()
_lock = threading.Lock()
_counter = itertools.count()


def ephemeral_range(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> tuple[int, int]:
    """The kernel's range for outgoing connections' source ports (Linux's default without it)."""
    try:
        with open(path, encoding="ascii") as handle:
            low, high = (int(part) for part in handle.read().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def candidates() -> tuple[int, int]:
    """The ports tests take from: [first, end) outside the ephemeral range."""
    low, high = ephemeral_range()
    if low - LOWEST >= 2000:
        return LOWEST, low
    return high + 1, 65536  # a range moved down to LOWEST: the ports above it


def is_free(port: int) -> bool:
    for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET, "127.0.0.1")):
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((address, port))
            except OSError:
                return False
    return True


def free_port() -> int:
    """A free TCP port outside the ephemeral range, not given before in this process."""
    first, end = candidates()
    span = end - first
    start = (os.getpid() * 7919) % span  # processes (parallel test runs) start apart
    with _lock:
        for _attempt in range(span):
            port = first + (start + next(_counter)) % span
            if port not in _given and is_free(port):
                _given.add(port)
                return port
    raise RuntimeError(f"no free port in {first}..{end - 1}")
