"""A sim cluster with no private network (``ddpkit sim up N --no-private-network``).

Some providers no longer offer private IPs for multi-node: each instance has only its container's
NAT side, eth0 with the same 172.17.0.4 everywhere, reaching no other instance. Such a cluster has
no bridge and no private NIC; the topology skips their steps (``SimSpec.private_network``), and
nothing can be shaped, so ``--rate``/``--delay``/``--loss``/``--ifname-style`` are refused.
"""

from __future__ import annotations

from collections.abc import Mapping

from ddpkit.errors import ConfigError
from ddpkit.i18n import _


def check_options(rate: str | None, delay: str | None, loss: str | None,
                  ifnames: Mapping[int, str]) -> None:
    """ConfigError when options that shape or name the private NIC come with no private network
    (a ``SimSpec``'s values, checked as it is made)."""
    given = [flag for flag, value in (("--rate", rate), ("--delay", delay), ("--loss", loss),
                                      ("--ifname-style", ifnames)) if value]
    if given:
        raise ConfigError(
            "sim-no-private-network-conflict",
            _("{flags} shape or name the private NIC, which --no-private-network leaves out",
              flags=", ".join(given)),
            _("drop {flags}, or drop --no-private-network", flags=", ".join(given)),
        )
