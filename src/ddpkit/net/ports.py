"""The default ports, in one place: torchrun's master (static rendezvous) and c10d's rendezvous
port, which ddpkit's join store uses."""

from __future__ import annotations

DEFAULT_MASTER_PORT = 29500  # torchrun's --master-port default
DEFAULT_JOIN_PORT = 29400  # c10d's default rendezvous port; ddpkit's join store listens there
