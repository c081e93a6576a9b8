"""A launcher's ssh unable to look up a node's name: that node never starts its ranks.

Launchers that start a job's processes on other machines over ssh (pdsh for DeepSpeed's runner
and accelerate's, Open MPI's rsh launcher for mpirun and Horovod, a ddpkit or torchrun wrapper)
run OpenSSH's client once per host. Its ``ssh: Could not resolve hostname <host>: <getaddrinfo's
words>`` (ssh.c, a fatal error: ssh exits 255) says the launching machine cannot look that name
up: a hostfile or ``--hosts`` entry that is not in its DNS or /etc/hosts, a typo, or on
Kubernetes a worker's headless-service name that the launcher pod's DNS settings do not resolve
(the facts' ``UNRESOLVED_HOST``). The node named is never reached, so its ranks never start: the
catalogue's ``peer-unreachable``. (A refused, timed-out or unroutable ``connect to host`` is read
by the connection rules.)
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.log.causes.base import NotingValues
from ddpkit.doctor.log.facts.kinds import FactKind
from ddpkit.i18n import _


class SshUnresolved(NotingValues):
    needs = frozenset({FactKind.UNRESOLVED_HOST})
    specificity = 15
    finding_id = "peer-unreachable"
    supersedes = GENERIC | {"internal-error"}

    def words(self) -> tuple[str, str]:
        text = _("ssh on the launching node could not look up {hosts}: that name is not in its "
                 "DNS or /etc/hosts, so the launcher never reached that node and its ranks "
                 "never started.", hosts=self.listed)
        fix = _("On the launching node, check the name: getent hosts <name>. Write the nodes' "
                "private addresses in the hostfile (or --hosts) instead of names, or add the "
                "names to /etc/hosts there; on Kubernetes, give the launcher pod the cluster's "
                "DNS (dnsPolicy: ClusterFirst) and use the workers' service names as they "
                "resolve in it.")
        return text, fix
