"""A link-local address in the job's network.

169.254.0.0/16 (RFC 3927) and fe80::/10 (RFC 4291) reach only the link they are on: no router
forwards them, so a peer on another machine never reaches one. Cloud machines carry such
interfaces beside the private network, often with the same address on every instance (EKS Pod
Identity's ``pod-id-link0`` 169.254.170.23, the instance metadata link), and NCCL's socket
transport takes every interface its default filter lets through. A link-local address that
NCCL, Gloo or c10d dialled and failed to reach, or that a job spanning machines advertised, is
the cause.
"""

from __future__ import annotations

from ddpkit.doctor.findings import Finding, Severity
from ddpkit.doctor.log.causes.base import GENERIC, Cause, Context, made
from ddpkit.doctor.log.causes.container_bridge import NETWORK_KINDS
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import AddressClass, Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_KINDS = NETWORK_KINDS | {"job-fact", "rdzv-connection", "gloo-mesh-failed", "gloo-timeout",
                          "nccl-warn", "exception", "failure-line", "nccl-error"}
_STACK_WORDS = ("NCCL", "NET/", "socketPollConnect", "Gloo", "gloo", "c10d", "client socket",
                "DistNetworkError", "TCPStore", "endezvous")
_FAILED_DIAL = frozenset({"101", "110", "111", "113"})  # unreachable, timed out, refused


class LinkLocal(Cause):
    needs = frozenset({FactKind.ADDRESS, FactKind.INTERFACE})
    kinds = _KINDS
    specificity = 25
    supersedes = GENERIC | {"peer-unreachable", "firewall", "connection-lost",
                            "rendezvous-timeout"}

    def __init__(self) -> None:
        self.addresses: dict[str, None] = {}
        self.interfaces: dict[str, None] = {}
        self.failed_dial = False
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        found = [f.value for f in facts if f.address_class is AddressClass.LINK_LOCAL]
        if not found or not any(word in event.text for word in _STACK_WORDS):
            return
        for value in found[:4]:
            if len(self.addresses) < 4:
                self.addresses.setdefault(value)
        for fact in facts:
            if fact.kind is FactKind.INTERFACE and fact.detail in found and \
                    len(self.interfaces) < 4:
                self.interfaces.setdefault(fact.value)
        self.failed_dial = self.failed_dial or any(
            f.kind is FactKind.ERRNO and f.value in _FAILED_DIAL for f in facts)
        self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if not self.addresses or not (self.failed_dial or context.multi_node):
            return None
        text = [_("The job's network lines show a link-local address ({addresses}): such "
                  "addresses reach only their own link, and cloud machines often carry the same "
                  "one on every instance, so a peer on another machine cannot connect to it.",
                  addresses=", ".join(self.addresses))]
        if self.interfaces:
            text.append(_("NCCL or Gloo used the interface {interfaces} for it.",
                          interfaces=", ".join(self.interfaces)))
        excluded = ",".join(["lo", "docker", *(self.interfaces or [
            _("<the interface with {address}>", address=next(iter(self.addresses)))])])
        fix = _("Keep the job on the private network every node shares: export "
                "NCCL_SOCKET_IFNAME=<that interface> GLOO_SOCKET_IFNAME=<that interface> "
                "(`ddpkit nics` names it), or exclude the link-local one (`ip -o addr` shows "
                "which interface holds it): export NCCL_SOCKET_IFNAME=^{excluded}",
                excluded=excluded)
        severity: Severity = "error" if self.failed_dial or context.network_failed else "warning"
        return made("wrong-interface", severity, text, fix, merge(self.bag.items))
