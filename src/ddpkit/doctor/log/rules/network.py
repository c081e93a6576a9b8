"""Network findings from log events: wrong-interface, container-network, interface-not-found,
firewall, peer-unreachable (and an unresolvable master for rendezvous-config).

The correlation across files lives here: the addresses ranks bootstrapped on are compared with
the addresses other ranks failed to connect to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ddpkit.doctor.addresses import address_kind, describe_kind, is_unreachable, normalise_address
from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding, Severity
from ddpkit.doctor.log.evidence import Bag, Capped, merge, origins_text
from ddpkit.doctor.log.facts.kinds import GAI_ERRORS
from ddpkit.doctor.log.facts.network import names_c10d_target
from ddpkit.doctor.log.facts.winsock import error_class
from ddpkit.doctor.log.rules.gloo_mesh import gloo_mesh_failed
from ddpkit.doctor.log.rules.traps import gloo_on_loopback, mixed_socket_lists, silent_bootstrap_failure
from ddpkit.doctor.log.scan import Event
from ddpkit.doctor.wording import replaced, specific_then_general
from ddpkit.i18n import _, _n
from ddpkit.wording import sentences

SOCKET_ITEM = re.compile(r"\[\d+\]([^\s:]+):([^\s<]+)<\d+>")




_ERROR_WORDS = {
    "refused": _("were refused"), "timeout": _("timed out"), "unreachable": _("found no route"),
    "abort": _("were aborted"), "other": _("failed"),
}
_ERROR_WORD = {  # one attempt
    "refused": _("was refused"), "timeout": _("timed out"), "unreachable": _("found no route"),
    "abort": _("was aborted"), "other": _("failed"),
}



@dataclass
class _Boot:
    iface: str
    address: str
    origins: set[str] = field(default_factory=set)
    bag: Bag = field(default_factory=Bag)


@dataclass
class _Conn:
    address: str  # as printed; "" when the line names none
    err: str
    sources: set[str] = field(default_factory=set)
    origins: set[str] = field(default_factory=set)
    ports: set[str] = field(default_factory=set)
    bag: Bag = field(default_factory=Bag)
    named: bool = False  # a line named this target as the job gave it (c10d's summary, Gloo, NCCL)

    @property
    def store_only(self) -> bool:
        return self.sources == {"c10d"}

    def words(self) -> str:
        target = _(" to {address}", address=self.address) if self.address else ""
        port = _(" (port {ports})", ports=", ".join(sorted(self.ports))) if self.ports else ""
        times = _n("{count} connection attempt", "{count} connection attempts", self.bag.count)
        words = _ERROR_WORD[self.err] if self.bag.count == 1 else _ERROR_WORDS[self.err]
        return _("{times}{target}{port} {outcome}", times=times, target=target, port=port,
                 outcome=words)


class NetworkRules:
    """Collects the network facts of all logs; ``findings()`` decides once everything is read."""

    def __init__(self) -> None:
        self.boots: Capped[str, _Boot] = Capped()
        self.socket_lists: Capped[str, list[tuple[str, str]]] = Capped()
        self.socket_bag = Bag()
        self.ifname: Capped[str, str] = Capped()  # origin -> NCCL_SOCKET_IFNAME value
        self.ifname_bag = Bag()
        self._conns: Capped[tuple[str, str], _Conn] = Capped(64)
        self.c10d_ports: set[str] = set()  # the ports c10d's summary lines name (its targets')
        self._conn_memo: dict[tuple[str, str], _Conn] = {}  # (printed address, error) -> conn
        self.missing_bag = Bag()
        self.missing_names: set[str] = set()
        self.missing_origins: set[str] = set()
        self.unresolved: set[str] = set()
        self.unresolved_bag = Bag()
        self.resolve_words = ""  # the resolver's own words, the first line's

        # a failed lookup other than c10d's (socket.cpp's "... network addresses of (host, port)
        # cannot be retrieved", retried until its connect timeout): Python's gaierror, say
        self.lookup_gave_up = False
        self.rdzv_connection = Bag()
        self.nccl_info_seen = False
        self.gloo_fallback = Bag()
        self.gloo_mesh_failed = Bag()
        self.oob: Capped[str, tuple[str, str]] = Capped()  # origin -> NET/IB's OOB (iface, addr)
        self.oob_bag = Bag()
        self.bootstrap_failed = Bag()
        self.bootstrap_codes: set[str] = set()
        self.bootstrap_failed_origins: set[str] = set()
        self.nccl_warned = False

    def feed(self, event: Event) -> None:
        kind = event.kind
        if "NCCL WARN" in event.text:
            self.nccl_warned = True
        if kind == "nccl-bootstrap":
            self.nccl_info_seen = True
            address = event.get("addr")
            boot = self.boots.slot(normalise_address(address), lambda: _Boot(event.get("iface"),
                                                                             address))
            if boot is not None:
                if len(boot.origins) < 64:
                    boot.origins.add(event.origin)
                boot.bag.add(event)
        elif kind == "nccl-socket-ifaces":
            items = SOCKET_ITEM.findall(event.get("ifaces"))
            if items and self.socket_lists.slot(event.origin, lambda: items) is not None:
                self.socket_bag.add(event)
        elif kind == "nccl-env" and event.get("var") == "NCCL_SOCKET_IFNAME":
            self.ifname.slot(event.origin, lambda: event.get("value"))
            self.ifname_bag.add(event)
        elif kind == "connect-error":
            data = event.data
            address, err_text = data.get("addr", ""), data.get("err", "")
            conn = self._conn_memo.get((address, err_text))
            if conn is None:
                err = error_class(err_text)
                conn = self._conns.slot((normalise_address(address), err),
                                       lambda: _Conn(address, err))
                if conn is not None and len(self._conn_memo) < 1024:
                    self._conn_memo[(address, err_text)] = conn
            if event.get("source") == "c10d" and names_c10d_target(event.text):
                if event.get("port") and len(self.c10d_ports) < 8:
                    self.c10d_ports.add(event.get("port"))
                if conn is not None:
                    conn.named = True
            elif conn is not None and event.get("source") != "c10d":
                conn.named = True
            if conn is not None:
                conn.sources.add(event.get("source", "other"))
                if len(conn.origins) < 64:
                    conn.origins.add(event.origin)
                if event.get("port") and len(conn.ports) < 8:
                    conn.ports.add(event.get("port"))
                conn.bag.add(event)
        elif kind == "no-interface":
            self.missing_bag.add(event)
            if len(self.missing_origins) < 64:
                self.missing_origins.add(event.origin)
            if event.get("name") and len(self.missing_names) < 16:
                self.missing_names.add(event.get("name"))
        elif kind == "resolve-failed":
            self.unresolved_bag.add(event)
            self.resolve_words = self.resolve_words or event.get("detail")
            self.lookup_gave_up = self.lookup_gave_up or not event.get("host")
            if event.get("host") and len(self.unresolved) < 16:
                self.unresolved.add(event.get("host"))
        elif kind == "rdzv-connection":
            self.rdzv_connection.add(event)
        elif kind == "gloo-loopback-fallback":
            self.gloo_fallback.add(event)
        elif kind == "gloo-mesh-failed":
            self.gloo_mesh_failed.add(event)
        elif kind == "nccl-oob":
            if self.oob.slot(event.origin, lambda: (event.get("iface"), event.get("addr"))):
                self.oob_bag.add(event)
        elif kind == "bootstrap-retcode":
            self.bootstrap_failed.add(event)
            if len(self.bootstrap_codes) < 8:
                self.bootstrap_codes.add(event.get("code"))
            if len(self.bootstrap_failed_origins) < 64:
                self.bootstrap_failed_origins.add(event.origin)
        elif kind == "nccl-socket-item":
            listed = self.socket_lists.slot(event.origin, list)
            if listed is not None and len(listed) < 32:
                listed.append((event.get("iface"), event.get("addr")))
                self.socket_bag.add(event)

    @property
    def conns(self) -> dict[tuple[str, str], _Conn]:
        """The failed connections, less c10d's per-attempt addresses on no port its summaries
        name: torch 2.13 printed an IPv4 attempt's address garbled (facts/network.py)."""
        return {key: conn for key, conn in self._conns.items()
                if conn.named or not conn.store_only or not self.c10d_ports
                or conn.ports & self.c10d_ports}

    # --- decisions: each an entry of rules/order.RULES, which states when it is asked ------------

    def gloo_mesh(self) -> Finding | None:
        return gloo_mesh_failed(self.gloo_mesh_failed, len(self.conns))

    def mixed_sockets(self) -> Finding | None:
        return mixed_socket_lists(self.socket_lists.data, self.socket_bag.items,
                                  failed=bool(self.conns))

    def silent_bootstrap(self) -> Finding:
        boot_ifaces = {b.iface: b.address for b in self.boots.data.values()}
        boot_ifaces.update(dict(self.oob.data.values()))
        return silent_bootstrap_failure(
            self.bootstrap_failed, self.bootstrap_failed_origins, self.bootstrap_codes,
            boot_ifaces,
            merge(self.oob_bag.items, *(b.bag.items for b in self.boots.data.values())))

    def unexplained_conns(self, multi_node: bool, init_hung: bool,
                          gloo_loopback: bool) -> list[_Conn]:
        """The failed connections neither a wrong address, Gloo on loopback (when that entry
        fired) nor an unresolved master explains."""
        explained: set[tuple[str, str]] = set()
        self.wrong_or_container(multi_node, init_hung, explained)
        if gloo_loopback:
            self.gloo_loopback(multi_node, explained)
        self.unresolved_master(explained)
        return [c for k, c in self.conns.items() if k not in explained]

    def firewall(self, rest: list[_Conn]) -> Finding | None:
        timed_out = [c for c in rest if c.err == "timeout" and not c.store_only]
        return self._firewall(timed_out) if timed_out else None

    def peer_unreachable(self, rest: list[_Conn], found: bool) -> Finding | None:
        """``found``: a network finding came before (a lone rendezvous error then says no
        more)."""
        others = [c for c in rest if not (c.err == "timeout" and not c.store_only)]
        if others or (self.rdzv_connection and not found):
            return self._peer_unreachable(others)
        return None

    def interface_not_found(self) -> Finding | None:
        if not self.missing_bag:
            return None
        e = entry("interface-not-found")
        parts = []
        for name in sorted(self.missing_names):
            parts.append(_("GLOO_SOCKET_IFNAME (or the Gloo device) names {name!r}, which does "
                           "not exist on this node.", name=name))
        values = sorted({v for o, v in self.ifname.items() if o in self.missing_origins})
        for value in values:
            parts.append(_("NCCL_SOCKET_IFNAME={value} matches no usable interface on {hosts}.",
                           value=value, hosts=origins_text(self.missing_origins)))
        if not parts:
            parts.append(_("NCCL found no usable socket interface at all."))
        fix = e.fix
        return Finding(e.id, e.severity, e.title, specific_then_general(parts, e.explanation), fix,
                       merge(self.missing_bag.items, self.ifname_bag.items))

    def wrong_or_container(self, multi_node: bool, init_hung: bool,
                           explained: set[tuple[str, str]] | None = None) -> list[Finding]:
        """``init_hung``: NCCL init started and never completed (a silent wrong address);
        ``explained``: gets the connections the finding explains."""
        explained = set() if explained is None else explained
        bad = {a: b for a, b in self.boots.items() if is_unreachable(b.address, b.iface)}
        shared = {a: b for a, b in self.boots.items() if len(b.origins) >= 2}
        suspects = {**bad, **shared}
        reasons: list[str] = []
        bags: list[Bag] = []
        for key, conn in self.conns.items():
            address = key[0]
            if address and address in suspects:
                boot = suspects[address]
                reasons.append(_("{hosts}: {words}, the very address {boot_hosts} bootstrapped "
                                 "on, so this is certain, not a guess.",
                                 hosts=origins_text(conn.origins), words=conn.words(),
                                 boot_hosts=origins_text(boot.origins)))
            elif address and is_unreachable(conn.address) and (
                multi_node or address_kind(conn.address) != "loopback"
            ):
                via = "Gloo" if "gloo" in conn.sources else _("The ranks")
                reasons.append(_("{via} dialled {address}, {kind}: {words}.", via=via,
                                 address=conn.address, kind=describe_kind(conn.address),
                                 words=conn.words()))
                if "gloo" in conn.sources:
                    reasons.append(_("Gloo advertises the address its hostname resolves to "
                                     "unless GLOO_SOCKET_IFNAME is set."))
            elif not address and suspects:
                reasons.append(_("Then {words} ({hosts}).", words=conn.words(),
                                 hosts=origins_text(conn.origins)))
            else:
                continue
            explained.add(key)
            bags.append(conn.bag)
        severity: Severity = "error"
        if not reasons:
            if not (suspects and (multi_node or shared or init_hung)):
                return []
            severity = "warning"
            reasons.append(_("No connection has failed in this log, but peers on other "
                             "machines cannot reach this address."))
            if init_hung:
                reasons.append(_("NCCL init started and never completed, which is what peers "
                                 "waiting on an unreachable address look like."))
        facts = []
        for boot in sorted(suspects.values(), key=lambda b: b.address):
            bags.insert(0, boot.bag)
            facts.append(_("{hosts} bootstrapped on {iface}:{address}, {kind}.",
                           hosts=origins_text(boot.origins), iface=boot.iface,
                           address=boot.address, kind=describe_kind(boot.address, boot.iface)))
        for boot in sorted(shared.values(), key=lambda b: b.address):
            facts.append(_("{count} different machines claim {address}: one address cannot "
                           "identify several machines.", count=len(boot.origins),
                           address=boot.address))
        if suspects and self.nccl_info_seen and not self.ifname:
            reasons.append(_("No `NCCL_SOCKET_IFNAME set ...` line appears, so the variable most "
                             "likely never reached the ranks' environment (exported in another "
                             "shell or dropped by the launcher)."))
        bags.append(self.socket_bag)
        evidence = merge(*(b.items for b in bags))
        if suspects and self._containers_only(suspects):
            e = entry("container-network")
            text = sentences([*facts, *reasons,
                              _("Every interface NCCL listed is a container bridge.")])
            return [Finding(e.id, e.severity, e.title, specific_then_general(text, e.explanation),
                            e.fix, evidence)]
        e = entry("wrong-interface")
        return [Finding(e.id, severity, e.title,
                        specific_then_general([*facts, *reasons], e.explanation),
                        self._interface_fix(), evidence)]

    def gloo_loopback(self, multi_node: bool,
                      explained: set[tuple[str, str]] | None = None) -> list[Finding]:
        explained = set() if explained is None else explained
        loopback = [(k, c) for k, c in self.conns.items()
                    if c.address and address_kind(c.address) == "loopback"
                    and c.err in ("refused", "timeout")]
        addressless = [(k, c) for k, c in self.conns.items() if not c.address]
        finding = gloo_on_loopback(self.gloo_fallback, self.gloo_mesh_failed,
                                   [(c.address, c.bag) for _, c in loopback],
                                   [c.bag for _, c in addressless], multi_node)
        if finding is None:
            return []
        explained.update(k for k, _ in loopback)
        if self.gloo_fallback:
            explained.update(k for k, _ in addressless)
        return [finding]

    def _containers_only(self, suspects: dict[str, _Boot]) -> bool:
        origins = {o for b in suspects.values() for o in b.origins}
        lists = [self.socket_lists.data[o] for o in origins if o in self.socket_lists.data]
        return bool(lists) and all(is_unreachable(addr, name) for items in lists
                                   for name, addr in items)

    def _interface_fix(self) -> str:
        per_origin: dict[str, list[str]] = {}
        for origin, items in self.socket_lists.items():
            good = [name for name, addr in items if not is_unreachable(addr, name)]
            if good:
                per_origin[origin] = good
        names = sorted({good[0] for good in per_origin.values()})
        check = _("Check the choice against the master: ddpkit nics --to <master-addr>\n"
                  "(or let ddpkit pick and persist it: ddpkit nccl-conf set --auto --to "
                  "<master-addr>)\n"
                  "(ddpkit launch sets both variables for you.)")
        if len(names) == 1:
            return _("Use {name} (the routable interface NCCL listed) on every node:\n"
                     "  export NCCL_SOCKET_IFNAME=={name} GLOO_SOCKET_IFNAME={name}\n"
                     "or persist it: ddpkit nccl-conf set NCCL_SOCKET_IFNAME=={name}\n{check}",
                     name=names[0], check=check)
        if not names:
            return entry("wrong-interface").fix
        per_node = "\n".join(f"  on {origin}: export NCCL_SOCKET_IFNAME=={good[0]} "
                             f"GLOO_SOCKET_IFNAME={good[0]}"
                             for origin, good in sorted(per_origin.items()))  # commands: as is
        return _("The routable interface has a different name per node; set it per node:\n"
                 "{per_node}\n"
                 "or persist it on each node: ddpkit nccl-conf set "
                 "NCCL_SOCKET_IFNAME==<that node's name>\n{check}", per_node=per_node,
                 check=check)

    def unresolved_master(self, explained: set[tuple[str, str]] | None = None) -> Finding | None:
        """The master's hostname did not resolve (``explained``: as wrong_or_container's)."""
        explained = set() if explained is None else explained
        if not self.unresolved_bag:
            return None
        bags = [self.unresolved_bag]
        for key, conn in self.conns.items():
            if key[0] and key[0] in {normalise_address(h) for h in self.unresolved}:
                explained.add(key)
                bags.append(conn.bag)
        hosts = ", ".join(sorted(self.unresolved)) or _("the master's hostname")
        e = entry("rendezvous-config")
        words = self.resolve_words or GAI_ERRORS[-2][1]  # (EAI_NONAME's text)
        text = (_("{hosts} does not resolve to an address ({words}), so no rank can reach the "
                  "store.", hosts=hosts, words=words) if self.lookup_gave_up else
                _("{hosts} did not resolve to an address when c10d looked it up ({words}). c10d "
                  "looks it up again until its connect timeout: a name that never resolves "
                  "leaves every rank unable to reach the store; one whose record appears later "
                  "(a Kubernetes pod's, once its pod runs) was only a wait.",
                  hosts=hosts, words=words))
        fix = _("Use the master's private IP address instead of a name, on every node:\n"
                "  --master-addr 10.0.0.2   (find it on the master: ddpkit nics)\n"
                "With --rdzv-backend c10d, torchrun itself hands the workers node 0's hostname: "
                "give every node --local-addr <that node's private IP>.")
        # (the general words say the rendezvous could not start: a retried lookup does not show it)
        said = specific_then_general(text, e.explanation) if self.lookup_gave_up else text
        return Finding(e.id, e.severity, e.title, said, fix, merge(*(b.items for b in bags)))

    def _firewall(self, conns: list[_Conn]) -> Finding:
        e = entry("firewall")
        said = [_("{hosts}: {words}.", hosts=origins_text(c.origins), words=c.words())
                for c in conns]
        return Finding(e.id, e.severity, e.title, specific_then_general(said, e.explanation),
                       e.fix,
                       merge(*(c.bag.items for c in conns)))

    def _peer_unreachable(self, conns: list[_Conn]) -> Finding:
        e = entry("peer-unreachable")
        parts: list[str] = [_("{hosts}: {words}.", hosts=origins_text(c.origins),
                              words=c.words()) for c in conns]
        if any(c.store_only for c in conns):
            parts.append(_("The c10d store client keeps retrying refused connections until its "
                           "timeout, so a master that is not (yet) listening looks like this "
                           "too."))
        if self.rdzv_connection:
            parts.append(_("torchrun could not talk to its c10d rendezvous store "
                           "(RendezvousConnectionError)."))
        targets = sorted({c.address for c in conns if c.address})
        fix = e.fix
        if len(targets) == 1 and address_kind(targets[0]) == "loopback":
            # (a route to this machine's own loopback always exists: `nics --to` checks nothing)
            fix = _("{address} is this machine's own loopback: start the master (node 0, rank 0) "
                    "on this machine first and check that it listens there. A job that spans "
                    "machines needs the master's private IP on every node instead (find it on "
                    "the master with: ddpkit nics).", address=targets[0])
        elif len(targets) == 1:
            fix = replaced(fix, "<master-addr>", targets[0])
        return Finding(e.id, e.severity, e.title, specific_then_general(parts, e.explanation), fix,
                       merge(*(c.bag.items for c in conns), self.rdzv_connection.items))
