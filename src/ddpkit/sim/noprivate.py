"""A sim cluster with no private network (``ddpkit sim up N --no-private-network``).

Some providers no longer offer private IPs for multi-node: each instance has only its container's
NAT side, eth0 with the same 172.17.0.4 everywhere, reaching no other instance. Such a cluster has
no bridge and no private NIC; the topology skips their steps (``SimSpec.private_network``), and
nothing can be shaped, so ``--rate``/``--delay``/``--loss``/``--ifname-style`` are refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddpkit.errors import ConfigError
from ddpkit.i18n import _

if TYPE_CHECKING:
    from ddpkit.sim.spec import SimSpec


def check_spec(spec: SimSpec) -> None:
    """ConfigError when options that shape or name the private NIC come with no private network."""
    given = [flag for flag, value in (("--rate", spec.rate), ("--delay", spec.delay),
                                      ("--loss", spec.loss), ("--ifname-style", spec.ifnames))
             if value]
    if given:
        raise ConfigError(
            "sim-no-private-network-conflict",
            _("{flags} shape or name the private NIC, which --no-private-network leaves out",
              flags=", ".join(given)),
            _("drop {flags}, or drop --no-private-network", flags=", ".join(given)),
        )
