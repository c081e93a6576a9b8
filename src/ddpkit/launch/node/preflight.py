"""Checks before any worker starts: the master port is free, the master is reachable (also while
torchrun starts: :class:`MasterProbe`)."""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Callable

from ddpkit.errors import DdpkitError, NetworkProblem
from ddpkit.i18n import _
from ddpkit.launch.node.plan import NodePlan

RETRY_S = 0.25  # between connects to a master that is not up yet


def check_port_free(port: int, bind_address: str = "", *, flag: str = "--master-port",
                    what: str = "", fix: str = "") -> None:
    """Fail with ``port-in-use`` when something already listens on ``port`` on this machine; the
    fix names ``flag``, the option that moves this port."""
    family = socket.AF_INET6 if ":" in bind_address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((bind_address, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            owner = _port_owner(port)
            what = what or _("master port")
            fix = fix or _("on every node")
            raise NetworkProblem(
                "port-in-use",
                _("{what} {port} is already in use on this machine{owner}", what=what, port=port,
                  owner=owner),
                _("stop that process, or pick another port {where}, e.g. {flag} {next}",
                  where=fix, flag=flag, next=port + 1),
                details={"port": port},
            ) from exc


def _port_owner(port: int) -> str:
    try:
        import psutil

        for conn in psutil.net_connections(kind="tcp"):
            listening = conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN
            if listening and conn.pid:
                try:
                    proc = psutil.Process(conn.pid)
                    cmd = " ".join(" ".join(proc.cmdline()).split())[:80]
                    return _(" (by pid {pid}: {command})", pid=conn.pid, command=cmd)
                except psutil.Error:
                    return _(" (by pid {pid})", pid=conn.pid)
    except Exception:  # noqa: BLE001 - naming the owner is a courtesy, never a failure
        pass
    return ""


NO_ROUTE_ANSWERS = 2  # the kernel said "no route" this many times in a row: it will not change
CONNECT_S = 5.0  # one attempt: longer than the kernel's ARP resolution (3 probes, 1 s apart), so
# that an address nobody holds ends in its "no route to host", not in this timeout


def _connect(address: str, port: int, source: str | None, timeout: float) -> None:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        if source:
            sock.bind((source, 0))
        sock.connect((address, port))


def wait_for_master(
    address: str,
    port: int,
    *,
    source: str | None,
    ifname: str,
    timeout: float,
    on_retry: Callable[[str, float], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    cancelled: Callable[[], bool] | None = None,
    connect: Callable[[str, int, str | None, float], None] = _connect,
) -> float:
    """TCP-connect to the master's rendezvous port (from ``source``) until it answers.

    Retries every ``RETRY_S`` until ``timeout``: a master that is not started yet refuses
    connections (at once: retrying often costs nothing), one that is not reachable times out.
    A wait that cannot succeed ends before that: when this machine's kernel answers "no route
    to host" (nobody on the network answers for the address) ``NO_ROUTE_ANSWERS`` times in a
    row. Returns the seconds waited, also when ``cancelled()`` turns true (the caller no longer
    needs the answer); raises ``master-unreachable`` with what was tried.
    """
    start = clock()
    deadline = start + timeout
    attempts = no_route = 0
    last_error: str = _("no attempt made")
    while True:
        if cancelled is not None and cancelled():
            return clock() - start
        attempts += 1
        remaining = deadline - clock()
        try:
            connect(address, port, source, max(0.2, min(CONNECT_S, remaining)))
            return clock() - start
        except OSError as exc:
            last_error = _describe(exc)
            no_route = no_route + 1 if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH) else 0
        if no_route >= NO_ROUTE_ANSWERS:
            raise _unreachable(address, port, source, ifname, clock() - start, attempts,
                               last_error, no_route=True)
        if clock() >= deadline:
            break
        if on_retry is not None:
            on_retry(last_error, clock() - start)
        sleep(min(RETRY_S, max(0.0, deadline - clock())))
    raise _unreachable(address, port, source, ifname, timeout, attempts, last_error)


def _unreachable(address: str, port: int, source: str | None, ifname: str, seconds: float,
                 attempts: int, last_error: str, *, no_route: bool = False) -> NetworkProblem:
    message = (_("could not reach the master at {address}:{port} from {source} on {ifname} "
                 "within {seconds:g} s ({attempts} attempts; last: {error})", address=address,
                 port=port, source=source, ifname=ifname, seconds=round(seconds, 1),
                 attempts=attempts, error=last_error) if source else
               _("could not reach the master at {address}:{port} via {ifname} within "
                 "{seconds:g} s ({attempts} attempts; last: {error})", address=address,
                 port=port, ifname=ifname, seconds=round(seconds, 1), attempts=attempts,
                 error=last_error))
    if no_route:
        message = _("{message}: no machine on the network answers for {address}, so waiting "
                    "longer cannot help", message=message, address=address)
        fix = _("check that {address} is the master's private address (`ddpkit nics` on the "
                "master shows it) and give the same one on every node", address=address)
    else:
        fix = _("start `ddpkit launch --node-rank 0 ...` on the master first; if it runs, check "
                "that {address} is its private address (`ddpkit nics` there) and that no "
                "firewall blocks port {port}; raise --connect-timeout if the master starts "
                "slowly", address=address, port=port)
    return NetworkProblem(
        "master-unreachable", message, fix,
        details={"address": address, "port": port, "interface": ifname, "source": source,
                 "attempts": attempts, "last_error": last_error, "no_route": no_route},
    )


def _describe(exc: OSError) -> str:
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return _("connection timed out")
    if exc.errno == errno.ECONNREFUSED:
        return _("connection refused (nothing listens there yet)")
    if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return _("no route to host")
    if exc.errno == errno.EADDRNOTAVAIL:
        return _("source address not available on this machine")
    return exc.strerror or str(exc)


class MasterProbe:
    """A worker's check that the master's port answers, run while torchrun starts (torch's import
    alone takes seconds, and waiting for the master first put that after the master's start).
    ``failure`` is the ``master-unreachable`` error once the probe gave up."""

    def __init__(self, plan: NodePlan) -> None:
        self.plan = plan
        self.failure: DdpkitError | None = None
        self.answered: float | None = None  # monotonic time the master's port accepted
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ddpkit-master-probe", daemon=True)

    def start(self) -> MasterProbe:
        self._thread.start()
        return self

    def _run(self) -> None:
        config = self.plan.config
        try:
            wait_for_master(config.master_addr, config.master_port,
                            source=self.plan.interface.address, ifname=self.plan.interface.ifname,
                            timeout=config.connect_timeout, cancelled=self._done.is_set)
            self.answered = time.monotonic()
        except DdpkitError as exc:
            self.failure = exc
        finally:
            self._done.set()

    def answered_at(self) -> float | None:
        return self.answered

    def stop_reason(self) -> str | None:
        return _("the master did not answer") if self.failure is not None else None

    def finish(self) -> None:
        """Stop probing (torchrun has ended) and wait for the probe thread."""
        self._done.set()
        self._thread.join(timeout=5)
