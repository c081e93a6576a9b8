"""Preflight of every host at once, and the master address the workers route to.

One small stdlib-only Python program runs on every host in parallel (over ssh, or directly when the
host is this machine) and reports: its python, hostname, whether the working directory exists,
ddpkit's version and whether torch is installed, and ``$SSH_CONNECTION`` (the controller's address
as the host saw it, and the host's address as the controller reached it). Every host that fails is
listed in one error. torch is found with ``importlib`` rather than imported: importing it costs
seconds per host, and a broken install still fails loudly when the workers start.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ddpkit.errors import DdpkitError, EnvironmentProblem, NetworkProblem
from ddpkit.i18n import _
from ddpkit.launch.ssh.hostfile import Host
from ddpkit.launch.ssh.remote import SSH_FAILED, SshSettings, describe_ssh_failure, remote_command, ssh_argv
from ddpkit.wording import bars, clauses

PROBE_MARK = "ddpkit-probe "
PROBE_SCRIPT = r"""
import importlib.util, json, os, socket, sys
info = {"python": sys.executable, "hostname": socket.gethostname(),
        "ssh_connection": os.environ.get("SSH_CONNECTION", "")}
try:
    os.chdir(sys.argv[1])
    info["cwd"] = os.getcwd()
except OSError as exc:
    info["cwd_error"] = f"{exc.strerror}: {sys.argv[1]}"
try:
    import ddpkit
    info["ddpkit"] = ddpkit.__version__
except Exception as exc:
    info["ddpkit_error"] = f"{type(exc).__name__}: {exc}"
try:
    if importlib.util.find_spec("torch") is None:
        info["torch_error"] = "No module named 'torch'"
    else:
        from importlib.metadata import version
        info["torch"] = version("torch")
except Exception as exc:
    info["torch_error"] = f"{type(exc).__name__}: {exc}"
print("ddpkit-probe " + json.dumps(info), flush=True)
"""
PROBE_EXTRA_S = 30.0  # on top of the ssh connect timeout


@dataclass(frozen=True)
class HostProbe:
    host: Host
    node_rank: int
    local: bool
    problems: tuple[str, ...]  # empty when the host is fit for the job
    info: dict[str, Any]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def hostname(self) -> str:
        return str(self.info.get("hostname") or self.host.name)

    @property
    def client_address(self) -> str | None:
        """The controller's address as this host saw it (from ``$SSH_CONNECTION``)."""
        parts = str(self.info.get("ssh_connection", "")).split()
        return parts[0] if len(parts) == 4 else None

    @property
    def server_address(self) -> str | None:
        """This host's address as the controller reached it (from ``$SSH_CONNECTION``)."""
        parts = str(self.info.get("ssh_connection", "")).split()
        return parts[2] if len(parts) == 4 else None

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host.to_dict(), "node_rank": self.node_rank, "local": self.local,
                "ok": self.ok, "problems": list(self.problems), "info": self.info}


def probe_argv(host: Host, *, local: bool, python: str, cwd: str, settings: SshSettings) -> list[str]:
    argv = [python, "-c", PROBE_SCRIPT, cwd]
    return argv if local else ssh_argv(host, remote_command(argv), settings)


def judge(host: Host, node_rank: int, *, local: bool, returncode: int, stdout: str, stderr: str,
          python: str, version: str) -> HostProbe:
    """Pure: a probe's exit and output -> the host's problems (all of them)."""
    info: dict[str, Any] = {}
    for line in stdout.splitlines():
        if line.startswith(PROBE_MARK):
            try:
                info = json.loads(line[len(PROBE_MARK):])
            except ValueError:
                info = {}
    problems: list[str] = []
    err_lines = stderr.splitlines()
    if not info:
        if not local and returncode == SSH_FAILED:
            problems.append(_("unreachable over ssh: {why}",
                              why=describe_ssh_failure(err_lines)))
        elif returncode == 127 or any("No such file" in line for line in err_lines):
            problems.append(_("no python at {python} there (pass --remote-python PATH)",
                              python=python))
        else:
            last = describe_ssh_failure(err_lines) if err_lines else _("no output")
            problems.append(_("the preflight program failed (exit {code}): {last}",
                              code=returncode, last=last))
        return HostProbe(host, node_rank, local, tuple(problems), info)
    if info.get("cwd_error"):
        problems.append(_("working directory missing there ({error})", error=info["cwd_error"]))
    if info.get("ddpkit_error"):
        problems.append(_("ddpkit is not importable by {python} ({error})",
                          python=info.get("python", python), error=info["ddpkit_error"]))
    elif info.get("ddpkit") != version:
        problems.append(_("ddpkit {there} there, {here} here (install the same version)",
                          there=info.get("ddpkit"), here=version))
    if info.get("torch_error"):
        problems.append(_("torch is not installed for {python} ({error})",
                          python=info.get("python", python), error=info["torch_error"]))
    return HostProbe(host, node_rank, local, tuple(problems), info)


def probe_hosts(hosts: Sequence[Host], *, local: Sequence[bool], python: str, cwd: str,
                settings: SshSettings, version: str) -> tuple[HostProbe, ...]:
    """Run the probe on every host, ``settings.parallel`` at once, each with its own deadline (a
    dead host costs that, not the job's); one HostProbe per host, in host order."""
    timeout = settings.connect_timeout + PROBE_EXTRA_S

    def one(index: int) -> HostProbe:
        host = hosts[index]
        argv = probe_argv(host, local=local[index], python=python, cwd=cwd, settings=settings)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
        except subprocess.TimeoutExpired:
            return HostProbe(host, index, local[index],
                             (_("no answer within {seconds:g} s", seconds=timeout),), {})
        except OSError as exc:
            return HostProbe(host, index, local[index],
                             (_("cannot run {program}: {error}", program=argv[0],
                                error=str(exc)),), {})
        return judge(host, index, local=local[index], returncode=proc.returncode,
                     stdout=proc.stdout, stderr=proc.stderr, python=python, version=version)

    with ThreadPoolExecutor(max_workers=min(settings.parallel, max(1, len(hosts)))) as pool:
        return tuple(pool.map(one, range(len(hosts))))


def require_fit(probes: Sequence[HostProbe]) -> None:
    """Raise one error listing every host that failed preflight."""
    bad = [p for p in probes if not p.ok]
    if not bad:
        return
    lines = [_("node {node} {host}: {problems}", node=p.node_rank, host=p.host.ssh_target,
               problems=clauses(p.problems)) for p in bad]
    unreachable = all(any(text.startswith(("unreachable", "no answer")) for text in p.problems)
                      for p in bad)
    cls: type[DdpkitError] = NetworkProblem if unreachable else EnvironmentProblem
    raise cls(
        "preflight-failed",
        _("{count} of {total} hosts are not ready: {hosts}", count=len(bad), total=len(probes),
          hosts=bars(lines)),
        _("fix each host listed (ssh must work without a password: `ssh -o BatchMode=yes HOST "
          "true`; the same ddpkit and torch installed under the same python path and working "
          "directory); --ssh-option and --remote-python adjust how hosts are reached"),
        details={"hosts": [p.to_dict() for p in probes]},
    )


@dataclass(frozen=True)
class MasterChoice:
    address: str
    reason: str


RouteSource = Callable[[str], tuple[str, str]]
"""A peer address -> (this side's source address, interface) by a real route lookup."""


def worker_address(probes: Sequence[HostProbe]) -> str | None:
    """An address of node 1 as the network knows it: the one the controller reached it at, or
    (when node 1 is this machine) the controller's address as node 0 saw it."""
    if len(probes) < 2:
        return None
    worker = probes[1]
    return worker.server_address if not worker.local else probes[0].client_address


def choose_master(probes: Sequence[HostProbe], *, explicit: str | None, route_here: RouteSource,
                  route_on_master: RouteSource) -> MasterChoice:
    """The master address: node 0's source address on its route to node 1.

    That is the address of the interface node 0 uses to reach the workers, which is the one they
    route back to: never the first entry of ``hostname -I`` (on rented instances that is often the
    container address every node shares) and never what node 0's hostname resolves to.
    """
    if explicit:
        return MasterChoice(explicit, "--master-addr")
    if len(probes) == 1 or all(p.local for p in probes):
        return MasterChoice("127.0.0.1", _("every node is this machine: everything is local"))
    target = worker_address(probes)
    if target is None:
        raise NetworkProblem(
            "master-address-unknown",
            _("cannot tell how node 1 ({worker}) is reached, so not which address of node 0 "
              "({master}) it routes to", worker=probes[1].host.name, master=probes[0].host.name),
            _("pass --master-addr with node 0's private address (`ddpkit nics` there)"),
        )
    master = probes[0]
    route = route_here if master.local else route_on_master
    try:
        source, ifname = route(target)
    except DdpkitError as exc:
        raise NetworkProblem(
            "master-address-unknown",
            _("node 0 ({master}) found no route to node 1 at {target}: {why}",
              master=master.host.name, target=target, why=exc.message),
            _("pass --master-addr with node 0's private address (`ddpkit nics` there)"),
        ) from exc
    return MasterChoice(source, _("node 0's ({host}) source address on its route to node 1 at "
                                  "{target}, via {ifname}", host=master.hostname, target=target,
                                  ifname=ifname))
