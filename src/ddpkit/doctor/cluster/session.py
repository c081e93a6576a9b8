"""I/O: one node's part in a cluster doctor run, met through torch's c10d TCPStore on the master.

Every node runs the same steps; node 0 also hosts the store (the engine's own ``TCPStore``, no
home-made server). Values are JSON bytes (:mod:`.model`), nothing else. Keys::

    doctor/meeting        the master's nnodes (a worker started with another --nnodes stops)
    doctor/claim/<r>      node r's claim (its nonce and hostname), taken with compare_set: a
                          second node claiming rank r is refused and recorded (not a counter)
    doctor/duplicates/<r> how many were refused
    doctor/duplicate/<r>/<n>  the hostname of the n-th claimant of rank r
    doctor/node/<r>       node r's record: candidates, echo listener ports, fingerprint
    doctor/probes/<r>     node r's probe results (or why it probed nothing)
    doctor/done           how many nodes have read everything (the master leaves last)

Deadlines come from one ``timeout``: nodes have ``timeout - PROBE_RESERVE_S`` seconds (counted
from the command's start, torch import included) to show up; the rest is for probing and
gathering, so the whole command ends within ``timeout``.
"""

from __future__ import annotations

import datetime
import platform
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ddpkit import nvidia_smi
from ddpkit.doctor.cluster import model
from ddpkit.doctor.cluster.matrix import plan_probes
from ddpkit.doctor.cluster.meeting import STORE_OP_TIMEOUT_S, MeetingStore
from ddpkit.doctor.cluster.model import Candidate, Fingerprint, NodeRecord, ProbeReport
from ddpkit.doctor.cluster.report import MeetingOutcome
from ddpkit.doctor.cluster.sockets import PROBE_PHASE_S, EchoListener, probe_all
from ddpkit.errors import ConfigError, NetworkProblem, UsageError
from ddpkit.i18n import _, _n
from ddpkit.launch.store_client import first_line
from ddpkit.net.ports import DEFAULT_MASTER_PORT, is_tcp_port

if TYPE_CHECKING:
    from ddpkit.net.interfaces import Nic

PROBE_RESERVE_S = 7.0  # of --timeout, kept for probing (at most PROBE_PHASE_S) and gathering
MIN_TIMEOUT_S = 15.0
POLL_S = 0.1
NVIDIA_SMI_TIMEOUT_S = 5.0
Progress = Callable[[str], None]


@dataclass(frozen=True)
class ClusterOptions:
    nnodes: int
    node_rank: int
    master_addr: str
    master_port: int = DEFAULT_MASTER_PORT
    timeout_s: float = 30.0
    listen_host: str | None = None  # bind the echo listener to one address (loopback tests)
    key: str = field(default="", repr=False)  # seals the store's values (token mode's job key)


def validate(options: ClusterOptions) -> None:
    """UsageError ``bad-usage`` for options that cannot describe a cluster."""
    if options.nnodes < 2:
        raise UsageError("bad-nnodes", _("--nnodes {nnodes}: cluster mode needs 2 or more nodes",
                           nnodes=options.nnodes), _("drop --nnodes to check this node alone"))
    if not 0 <= options.node_rank < options.nnodes:
        raise UsageError("node-rank-out-of-range",
                         _("--node-rank {rank} is not in 0...{last}", rank=options.node_rank,
                           last=options.nnodes - 1),
                         _("give every node its own rank, 0 on the master"))
    if not options.master_addr:
        raise UsageError("missing-master-addr", _("cluster mode needs --master-addr"),
                         _("give node 0's private address, e.g. --master-addr 10.0.0.2"))
    if not is_tcp_port(options.master_port):
        raise UsageError("bad-port", _("--master-port {port} is not a port number", port=options.master_port),
                         _("give a port between 1 and 65535, e.g. --master-port 29500"))
    if options.timeout_s < MIN_TIMEOUT_S:
        raise UsageError("bad-timeout", _("--timeout {timeout:g} is too short", timeout=options.timeout_s),
                         _("give at least {least:g} s (the last {reserve:g} s are for probing)",
                           least=MIN_TIMEOUT_S, reserve=PROBE_RESERVE_S))


def local_candidates(nics: Sequence[Nic]) -> tuple[Candidate, ...]:
    """Every up interface with a routable address, traps included, in the ranking's order."""
    from ddpkit.net.interfaces import NicKind
    from ddpkit.net.select import best_address, ranking, traps

    ranked = [n.name for n in ranking(nics)]
    out: list[Candidate] = []
    for nic in nics:
        address = best_address(nic)
        if not nic.up or nic.kind is NicKind.LOOPBACK or address is None or not address.is_routable:
            continue
        preference = ranked.index(nic.name) if nic.name in ranked else len(nics) + len(out)
        out.append(Candidate(nic.name, address.address, nic.kind.value, preference,
                             tuple(t.id for t in traps(nic, nics)), address.prefixlen))
    return tuple(sorted(out, key=lambda c: (c.preference, c.ifname)))


def _gpus() -> tuple[int | None, str]:
    """(GPU count, driver version) from nvidia-smi, which does not initialise CUDA."""
    answer = nvidia_smi.ask(["--query-gpu=driver_version", "--format=csv,noheader"],
                            NVIDIA_SMI_TIMEOUT_S)
    if not answer.found:
        return None, "n/a"
    if answer.error:
        return 0, answer.error[:80]
    return len(answer.lines), ",".join(sorted(set(answer.lines))) or "n/a"


def _torch_versions() -> tuple[str, str, str]:
    """(torch, CUDA build, NCCL) versions; NCCL only where torch was built with CUDA and NCCL."""
    import torch
    import torch.distributed as dist

    cuda = torch.version.cuda or "n/a"
    nccl = "n/a"
    if torch.version.cuda and dist.is_nccl_available():
        try:  # asks the NCCL library torch links (ncclGetVersion); no device is touched
            version = torch.cuda.nccl.version()  # type: ignore[no-untyped-call]
            nccl = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
        except Exception as exc:  # noqa: BLE001 - shown as the value; a diff will point at it
            nccl = f"unknown ({type(exc).__name__})"
    return str(torch.__version__), cuda, nccl


def collect_fingerprint(env: Mapping[str, str], *, hostname: str | None = None) -> Fingerprint:
    """This node's fingerprint: versions, GPUs, and the NCCL_*/GLOO_* settings in effect."""
    import socket

    from ddpkit import __version__
    from ddpkit.ncclconf.effective import load_effective
    from ddpkit.ncclconf.home import nccl_home

    settings: dict[str, str] = {k: v for k, v in env.items() if k.startswith("GLOO_")}
    origins: dict[str, str] = {}
    for setting in load_effective(dict(env), nccl_home(), defaults=False).settings:
        settings[setting.name] = setting.value
        if setting.source == "file" and setting.path:
            origins[setting.name] = setting.path
    torch_version, cuda, nccl = _torch_versions()
    gpus, driver = _gpus()
    return Fingerprint(hostname or socket.gethostname(), platform.python_version(), torch_version,
                       cuda, nccl, driver, gpus, __version__, tuple(sorted(settings.items())),
                       tuple(sorted(origins.items())))


def _check_master_side(options: ClusterOptions, nics: Sequence[Nic]) -> str:
    """On node 0: the master address is this node's own and the port is free. Returns the
    interface holding it; on a worker: the interface the route to the master leaves by."""
    from ddpkit.launch.node.preflight import check_port_free
    from ddpkit.net.interfaces import interface_holding
    from ddpkit.net.route import resolve, route_to

    addresses = resolve(options.master_addr)
    if options.node_rank == 0:
        holder = next((h for a in addresses if (h := interface_holding(a, nics))), None)
        if holder is None and not options.listen_host:
            raise ConfigError(
                "master-not-local",
                _("this is node 0 (the master) but --master-addr {addr} ({addresses}) is not an "
                  "address of this machine", addr=options.master_addr,
                  addresses=", ".join(addresses)),
                _("on node 0 give its own private address (see `ddpkit nics`); on the other "
                  "nodes run this command with --node-rank 1..N-1"))
        check_port_free(options.master_port)
        return holder.name if holder else "?"
    route = route_to(options.master_addr, nics)
    loopback = route.ifname == "lo" or addresses[0].startswith("127.") or addresses[0] == "::1"
    if route.local and not loopback:
        raise ConfigError(
            "master-address-shared",
            _("--master-addr {addr} is also an address of this machine (node {rank}, {ifname}): "
              "a NAT/container address that every node has", addr=options.master_addr,
              rank=options.node_rank, ifname=route.ifname),
            _("give node 0's private-network address instead (`ddpkit nics` on node 0)"))
    return route.ifname


def _check_reachable(options: ClusterOptions, nics: Sequence[Nic]) -> None:
    """``no-private-network`` at once when no interface here reaches another machine."""
    from ddpkit.net.facts import tun_device_exists
    from ddpkit.net.isolation import check_reachable
    from ddpkit.net.route import LOOPBACK_NAMES

    if not options.listen_host and options.master_addr not in LOOPBACK_NAMES:
        check_reachable(nics, tun_device_exists())


def _open_store(options: ClusterOptions, ifname: str, deadline: float) -> Any:
    from ddpkit.launch import store_client
    from ddpkit.launch.node.preflight import wait_for_master
    from ddpkit.net.route import resolve

    remaining = max(1.0, deadline - time.monotonic())
    is_master = options.node_rank == 0
    if not is_master:  # quiet retries until the master listens; then the store itself connects
        wait_for_master(options.master_addr, options.master_port, source=None, ifname=ifname,
                        timeout=remaining)
        connected = store_client.connect(options.master_addr, options.master_port,
                                         max(deadline, time.monotonic() + 1.0))
        if connected.store is None:
            raise NetworkProblem(
                "master-unreachable",
                _("could not connect to the master's store at {addr}:{port}: {why}",
                  addr=options.master_addr, port=options.master_port, why=connected.why),
                _("check --master-addr and --master-port, and that `ddpkit doctor --nnodes N "
                  "--node-rank 0` runs on the master")) from None
        connected.store.set_timeout(datetime.timedelta(seconds=STORE_OP_TIMEOUT_S))
        return connected.store
    try:  # listening on the master address only, like the join store
        store = store_client.serve(resolve(options.master_addr)[0], options.master_port, remaining)
    except (RuntimeError, OSError) as exc:
        what = _("start the store") if is_master else _("connect to the master's store")
        raise NetworkProblem(
            "master-unreachable" if not is_master else "store-failed",
            _("could not {what} at {addr}:{port}: {why}", what=what, addr=options.master_addr,
              port=options.master_port, why=first_line(exc)),
            _("check --master-addr and --master-port, and that nothing else uses the port")
        ) from None
    store.set_timeout(datetime.timedelta(seconds=STORE_OP_TIMEOUT_S))
    return store


def _join(meeting: MeetingStore, options: ClusterOptions, record: NodeRecord,
          deadline: float) -> None:
    if options.node_rank == 0:
        meeting.put("meeting", {"wire": model.WIRE_VERSION, "nnodes": options.nnodes})
    else:
        while not meeting.has("meeting"):
            if time.monotonic() > deadline:
                raise NetworkProblem(
                    "master-unreachable",
                    _("the master's store never said how many nodes it expects"),
                    _("run the same ddpkit on node 0"))
            time.sleep(POLL_S)
        expected = meeting.get("meeting").get("nnodes")
        if expected != options.nnodes:
            raise ConfigError(
                "nodes-disagree",
                _("this node was started with --nnodes {nnodes}, the master with --nnodes {expected}",
                  nnodes=options.nnodes, expected=expected),
                _("give every node the same --nnodes"))
    held = meeting.claim(f"claim/{options.node_rank}",
                         {"nonce": record.nonce, "hostname": record.hostname})
    if held is not None:
        count = meeting.add(f"duplicates/{options.node_rank}", 1)
        meeting.put(f"duplicate/{options.node_rank}/{count + 1}",
                    {"hostname": record.hostname})
        raise ConfigError(
            "duplicate-node-rank",
            _("node rank {rank} is already taken by another node", rank=options.node_rank),
            _("give every node its own --node-rank, 0 to N-1 (0 on the master)"))
    meeting.put(f"node/{options.node_rank}", record)


def _wait_for(meeting: MeetingStore, keys: Sequence[str], deadline: float,
              progress: Progress | None = None, what: str = "") -> list[str]:
    """Poll until every key exists or ``deadline``; returns the keys still missing."""
    missing = list(keys)
    last_note = time.monotonic()
    while missing:
        missing = [k for k in missing if not meeting.has(k)]
        if not missing or time.monotonic() >= deadline:
            break
        if progress is not None and time.monotonic() - last_note > 5.0:
            progress(_("still waiting for {what} {nodes}", what=what,
                       nodes=", ".join(k.rsplit("/", 1)[1] for k in missing)))
            last_note = time.monotonic()
        time.sleep(POLL_S)
    return missing


def _read(meeting: MeetingStore, key: str, parse: Callable[[dict[str, Any]], Any]) -> Any:
    try:
        return parse(meeting.get(key))
    except ValueError as exc:
        node = key.rsplit("/", 1)[1]
        raise ConfigError("doctor-version-mismatch",
                          _("node {node} sent a record this node cannot read: {why}", node=node,
                            why=str(exc)),
                          _("run the same ddpkit version on every node")) from None


def _duplicates(meeting: MeetingStore, nnodes: int) -> tuple[tuple[int, str], ...]:
    found = []
    for rank in range(nnodes):
        claims = 1 + min(meeting.add(f"duplicates/{rank}", 0), 16)  # someone may bump it
        for n in range(2, claims + 1):
            key = f"duplicate/{rank}/{n}"
            if meeting.has(key):
                found.append((rank, str(meeting.get(key).get("hostname", "?"))))
    return tuple(found)


def run_node(
    options: ClusterOptions,
    env: Mapping[str, str],
    *,
    started: float | None = None,
    nics: Sequence[Nic] | None = None,
    candidates: Sequence[Candidate] | None = None,
    fingerprint: Fingerprint | None = None,
    progress: Progress | None = None,
) -> MeetingOutcome:
    """This node's part: meet, probe every peer, gather everyone's results.

    ``started`` is the command's start (``time.monotonic()``); ``nics``, ``candidates`` and
    ``fingerprint`` replace discovery (tests). Raises DdpkitError for what stops this node from
    taking part at all (bad options, master unreachable, rank taken); everything about the other
    nodes is in the outcome.
    """
    validate(options)
    start = time.monotonic() if started is None else started
    meet_deadline = start + options.timeout_s - PROBE_RESERVE_S
    end_deadline = start + options.timeout_s - 0.5
    note = progress or (lambda _text: None)
    if nics is None:
        from ddpkit.net.interfaces import discover

        nics = discover()
    _check_reachable(options, nics)
    ifname = _check_master_side(options, nics)
    own = tuple(candidates) if candidates is not None else local_candidates(nics)
    fp = fingerprint or collect_fingerprint(env)
    nonce = secrets.token_hex(8)
    with EchoListener(options.node_rank, nonce, options.listen_host) as listener:
        ports = listener.start()
        record = NodeRecord(options.node_rank, options.nnodes, nonce, ports, own, fp)
        note(_("node {rank}: meeting the other nodes at the master {address}:{port} (up to "
               "{seconds:.0f} s)", rank=options.node_rank, address=options.master_addr,
               port=options.master_port, seconds=max(0.0, meet_deadline - time.monotonic())))
        store = _open_store(options, ifname, meet_deadline)
        meeting = MeetingStore(store, f"{options.master_addr}:{options.master_port}", options.key)
        _join(meeting, options, record, meet_deadline)
        note(_("node {rank} ({host}) joined at {addr}:{port}; waiting for the other nodes",
               rank=options.node_rank, host=fp.hostname, addr=options.master_addr,
               port=options.master_port))
        node_keys = [f"node/{r}" for r in range(options.nnodes)]
        missing = _wait_for(meeting, node_keys, meet_deadline, note, _("node(s)"))
        met_after = None if missing else time.monotonic() - start
        records = tuple(_read(meeting, k, NodeRecord.from_dict) for k in node_keys
                        if k not in missing)
        if missing:
            ranks = ", ".join(k.rsplit("/", 1)[1] for k in missing)
            report = ProbeReport(options.node_rank, skipped=f"node(s) {ranks} never showed up")
        else:
            targets = plan_probes(record, records)
            note(_n("all {count} nodes present after {after:.1f} s; probing {paths} path",
                    "all {count} nodes present after {after:.1f} s; probing {paths} paths",
                    len(targets), count=options.nnodes, after=met_after, paths=len(targets)))
            nonces = {r.nonce: r.rank for r in records}
            phase = max(1.0, min(PROBE_PHASE_S, end_deadline - time.monotonic() - 1.0))
            report = ProbeReport(options.node_rank, probe_all(options.node_rank, targets, nonces,
                                                              phase_s=phase))
        meeting.put(f"probes/{options.node_rank}", report)
        present = [r.rank for r in records]
        probe_keys = [f"probes/{r}" for r in present]
        if not missing:
            _wait_for(meeting, probe_keys, end_deadline - 0.5, note,
                      _("probe results of node(s)"))
        reports = tuple(_read(meeting, k, ProbeReport.from_dict) for k in probe_keys
                        if meeting.has(k))
        duplicates = _duplicates(meeting, options.nnodes)
        meeting.add("done", 1)
        if options.node_rank == 0:  # keep the store up until every node has read everything
            while meeting.add("done", 0) < len(present) and time.monotonic() < end_deadline:
                time.sleep(POLL_S)
    del meeting, store
    return MeetingOutcome(options.nnodes, options.node_rank, options.master_addr,
                          options.master_port, options.timeout_s - PROBE_RESERVE_S, records,
                          reports, duplicates, time.monotonic() - start, met_after)

