"""Trap addresses that show without the usual error line (issue 12): Gloo bound to loopback,
an NCCL socket transport spread over interfaces that other machines cannot reach, and an NCCL
bootstrap that failed with nothing but its return-code trail.

Both are read from what the log shows of the init sequence; neither needs a connection error,
but a failed connection makes them errors instead of warnings.
"""

from __future__ import annotations

from collections.abc import Iterable

from ddpkit.doctor.addresses import address_kind, is_unreachable
from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Evidence, Finding, Severity
from ddpkit.doctor.log.evidence import Bag, merge, origins_text
from ddpkit.doctor.wording import specific_then_general
from ddpkit.i18n import _
from ddpkit.wording import sentences


def gloo_on_loopback(
    fallback: Bag,
    mesh_failed: Bag,
    loopback_conns: list[tuple[str, Bag]],
    addressless_failures: list[Bag],
    multi_node: bool,
) -> Finding | None:
    """Gloo advertised loopback: its hostname did not resolve (the fallback warning), or a full
    mesh failed connecting to a loopback peer. ``loopback_conns``: (address, evidence) of failed
    connects to loopback; ``addressless_failures``: failed connects whose line names no address
    (a wrapped Gloo line)."""
    failed = bool(loopback_conns) or (bool(fallback) and bool(addressless_failures))
    if fallback:
        if not (failed or multi_node):
            return None  # one machine alone: loopback is where it should talk
        severity: Severity = "error" if failed else "warning"
    elif mesh_failed and loopback_conns:
        severity = "error"  # the mesh failed on that address: a failure, not a guess
    else:
        return None
    parts = []
    if fallback:
        parts.append(_("Gloo could not resolve this host's name to a local address and fell "
                       "back to loopback, so it advertised 127.0.0.1 to its peers."))
    if loopback_conns:
        addresses = ", ".join(sorted({a for a, _bag in loopback_conns}))
        parts.append(_("Gloo's full mesh then dialled {addresses} and was refused: a peer on "
                       "another machine was reached at its own loopback.", addresses=addresses))
    elif failed:
        parts.append(_("Its connections were then refused."))
    if not multi_node and not fallback:
        parts.append(_("(If every rank really runs on this one machine, look for a rank that "
                       "died before it could listen.)"))
    e = entry("wrong-interface")
    fix = _("Name the interface that reaches the other nodes, on every node:\n"
            "  export GLOO_SOCKET_IFNAME=<that interface> NCCL_SOCKET_IFNAME==<that interface>\n"
            "(or make the hostname resolve to that interface's address in /etc/hosts)\n"
            "Find it with: ddpkit nics --to <master-addr>   (ddpkit launch sets both for you)")
    bags = [fallback, mesh_failed] + [b for _addr, b in loopback_conns] + addressless_failures
    return Finding(e.id, severity, e.title, specific_then_general(parts, e.explanation), fix,
                   merge(*(b.items for b in bags)))


def mixed_socket_lists(
    socket_lists: dict[str, list[tuple[str, str]]],
    evidence: Iterable[Evidence],
    failed: bool,
) -> Finding | None:
    """NET/Socket uses several interfaces, some of which other machines cannot reach: NCCL spreads
    its inter-node connections over all of them (docker bridges, veths, link-local addresses)."""
    facts = []
    good_names: set[str] = set()
    for origin, items in sorted(socket_lists.items()):
        good = [name for name, addr in items if not is_unreachable(addr, name)]
        traps = [f"{name} ({address_kind(addr, name).replace('-', ' ')})" for name, addr in items
                 if is_unreachable(addr, name)]
        if len(items) < 2 or not good or not traps:
            continue
        good_names.update(good[:1])
        shown = (_("{some} and {count} more", some=", ".join(traps[:4]), count=len(traps) - 4)
                 if len(traps) > 4 else ", ".join(traps))
        facts.append(_("{origin}: NCCL's socket transport uses {count} interfaces, among them "
                       "{shown}, next to {good}.", origin=origins_text([origin]),
                       count=len(items), shown=shown, good=good[0]))
    if not facts:
        return None
    e = entry("wrong-interface")
    text = sentences([*facts, _("NCCL spreads its connections over every listed interface, so "
                                "some of them go to addresses the other nodes cannot reach.")])
    name = sorted(good_names)[0]
    fix = _("Keep only the routable interface, on every node (names differ per node? list "
            "each):\n"
            "  export NCCL_SOCKET_IFNAME=={name} GLOO_SOCKET_IFNAME={name}\n"
            "Check it against the master: ddpkit nics --to <master-addr>", name=name)
    severity: Severity = "error" if failed else "warning"
    return Finding(e.id, severity, e.title, specific_then_general(text, e.explanation), fix,
                   merge(evidence))


def silent_bootstrap_failure(
    failed: Bag,
    origins: set[str],
    codes: set[str],
    interfaces: dict[str, str],
    interface_evidence: Iterable[Evidence],
) -> Finding:
    """NCCL's bootstrap failed (its return codes run through bootstrap.cc) and no WARN says why.
    The bootstrap is plain TCP between the ranks, so its interface is the first suspect."""
    e = entry("wrong-interface")
    code_text = ", ".join(sorted(codes, key=int))
    parts: list[str] = [_("NCCL's bootstrap failed on {origins} (return code {codes} traced "
                          "through bootstrap.cc) and no NCCL WARN line says why.",
                          origins=origins_text(origins), codes=code_text)]
    if interfaces:
        named = ", ".join(f"{name}:{addr}" + (" (IPoIB)" if name.startswith("ib") else "")
                          for name, addr in sorted(interfaces.items()))
        parts.append(_("It bootstrapped on {named}.", named=named))
    parts.append(_("The bootstrap is plain TCP between the ranks, so only the socket interface "
                   "matters at this stage (not IB, not the transport): an interface the other "
                   "ranks cannot reach is the usual cause, a firewall the next."))
    fix = _("Name the interface that reaches the other nodes (often the ethernet NIC rather "
            "than an IPoIB or container one), on every node:\n"
            "  export NCCL_SOCKET_IFNAME==<that interface> GLOO_SOCKET_IFNAME=<that interface>\n"
            "Find it with: ddpkit nics --to <master-addr>; rerun with NCCL_DEBUG=WARN to see "
            "the failing call if it persists.")
    return Finding(e.id, "error", e.title, specific_then_general(parts, e.explanation), fix,
                   merge(failed.items, interface_evidence))
