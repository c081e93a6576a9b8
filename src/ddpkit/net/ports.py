"""The ports, in one place: torchrun's master (static rendezvous) and c10d's rendezvous port,
which ddpkit's join store uses, and what a TCP port can be."""

from __future__ import annotations

DEFAULT_MASTER_PORT = 29500  # torchrun's --master-port default
DEFAULT_JOIN_PORT = 29400  # c10d's default rendezvous port; ddpkit's join store listens there
LARGEST_PORT = 65535  # a TCP port is 16 bits


def is_tcp_port(number: int) -> bool:
    """Whether ``number`` is a port a program can listen on or dial: 1 to 65535 (0 asks the
    system for any free one)."""
    return 1 <= number <= LARGEST_PORT
