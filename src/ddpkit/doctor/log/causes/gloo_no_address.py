"""Gloo given neither an interface nor a hostname to take its address from: this machine's
hostname is empty.

ProcessGroupGloo makes its device from GLOO_SOCKET_IFNAME when it is set, else from the
machine's hostname (``createDefaultDevice``, gethostname). torch's GlooDeviceFactory.cpp
(makeTCPDevice, makeUVDevice; 1.x to 2.x) checks that one of them is there: "GlooDeviceFactory::
makeUVDevice(): interface or hostname can't be empty" (the facts' ``GLOO_NO_ADDRESS``). Both
were empty: no interface was named and the machine has no hostname (a Windows PC whose computer
name is blank, a container started without one), so the process group is never made. The
address settings, not the network, are what fail: rendezvous-config.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.log.causes.base import NotingValues
from ddpkit.doctor.log.facts.kinds import FactKind
from ddpkit.i18n import _


class GlooNoAddress(NotingValues):
    needs = frozenset({FactKind.GLOO_NO_ADDRESS})
    specificity = 20
    finding_id = "rendezvous-config"
    supersedes = GENERIC | {"peer-unreachable", "internal-error", "invalid-usage"}

    def words(self) -> tuple[str, str]:
        text = _("Gloo had no address to make its device from ({transport} transport): no "
                 "interface was named (GLOO_SOCKET_IFNAME unset or empty) and this machine's "
                 "hostname is empty, so the process group was never made.",
                 transport=self.listed)
        fix = _("Set GLOO_SOCKET_IFNAME to the interface that reaches the other ranks on every "
                "node (ddpkit nics shows it), or give the machine a hostname (Linux: hostnamectl "
                "set-hostname <name>; Windows: Rename-Computer), then rerun.")
        return text, fix
