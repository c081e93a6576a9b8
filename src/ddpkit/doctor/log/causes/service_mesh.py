"""A service mesh's sidecar in the training pods: it intercepts the connections between them.

Istio (which Kubeflow installs) injects an Envoy proxy into every pod of a namespace that has
injection on, and redirects the pod's inbound and outbound TCP through it (iptables): Envoy's
debug log names the cluster it makes for each intercepted port of its pod, "inbound|<port>||"
(the facts' ``MESH_INBOUND``). torch.distributed's store, Gloo's and NCCL's connections between
the pods go through the proxy then; they close early or never reach the peer ("remote early
close"), and init_process_group hangs. Kubeflow's own guidance for PyTorchJob: keep the sidecar
out of the training pods.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, NotingValues, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import FactKind
from ddpkit.i18n import _


class ServiceMesh(NotingValues):
    needs = frozenset({FactKind.MESH_INBOUND})
    specificity = 10
    finding_id = "firewall"
    supersedes = GENERIC

    def words(self) -> tuple[str, str]:
        text = _("A service mesh's sidecar proxy (Envoy, as Istio injects it) intercepts this "
                 "pod's connections on port {ports}: torch.distributed's store and Gloo's and "
                 "NCCL's connections between the pods go through the proxy, which closes them or "
                 "never passes them on, and init_process_group hangs.", ports=self.listed)
        fix = _("Keep the mesh out of the training pods: in the job's pod template (PyTorchJob, "
                "Job), set the annotation sidecar.istio.io/inject: \"false\"; or exclude the "
                "ports from interception (traffic.sidecar.istio.io/excludeInboundPorts and "
                "excludeOutboundPorts: the master port and the ports NCCL and Gloo use).")
        return text, fix

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text, fix = self.words()
        # (Envoy's debug lines: an error only where the run failed)
        severity = context.severity
        return made(self.finding_id, severity, text, fix, merge(self.bag.items))
