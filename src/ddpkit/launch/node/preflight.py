"""Checks before any worker starts: the master port is free, the master is reachable."""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Callable

from ddpkit.errors import NetworkProblem
from ddpkit.i18n import _

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
) -> float:
    """TCP-connect to the master's rendezvous port (from ``source``) until it answers.

    Retries every ``RETRY_S`` until ``timeout``: a master that is not started yet refuses
    connections (at once: retrying often costs nothing), one that is not reachable times out.
    Returns the seconds waited, also when ``cancelled()`` turns true (the caller no longer needs
    the answer); raises ``master-unreachable`` with what was tried.
    """
    start = clock()
    deadline = start + timeout
    attempts = 0
    last_error: str = _("no attempt made")
    while True:
        if cancelled is not None and cancelled():
            return clock() - start
        attempts += 1
        remaining = deadline - clock()
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.settimeout(max(0.2, min(3.0, remaining)))
                if source:
                    sock.bind((source, 0))
                sock.connect((address, port))
            return clock() - start
        except OSError as exc:
            last_error = _describe(exc)
        if clock() >= deadline:
            break
        if on_retry is not None:
            on_retry(last_error, clock() - start)
        sleep(min(RETRY_S, max(0.0, deadline - clock())))
    message = (_("could not reach the master at {address}:{port} from {source} on {ifname} "
                 "within {seconds:g} s ({attempts} attempts; last: {error})", address=address,
                 port=port, source=source, ifname=ifname, seconds=timeout, attempts=attempts,
                 error=last_error) if source else
               _("could not reach the master at {address}:{port} via {ifname} within "
                 "{seconds:g} s ({attempts} attempts; last: {error})", address=address,
                 port=port, ifname=ifname, seconds=timeout, attempts=attempts,
                 error=last_error))
    raise NetworkProblem(
        "master-unreachable",
        message,
        _("start `ddpkit launch --node-rank 0 ...` on the master first; if it runs, check that "
          "{address} is its private address (`ddpkit nics` there) and that no firewall blocks "
          "port {port}; raise --connect-timeout if the master starts slowly", address=address,
          port=port),
        details={"address": address, "port": port, "interface": ifname, "source": source,
                 "attempts": attempts, "last_error": last_error},
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
