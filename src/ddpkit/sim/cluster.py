"""Execute a sim cluster's life: ``up`` (idempotent, rolled back on failure), ``down``, ``inspect``.

All of it needs root. The removal itself lives in ``ddpkit.sim.teardown``.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddpkit.atomic_file import replace_file
from ddpkit.errors import ConfigError, DeadlineExceeded, EnvironmentProblem
from ddpkit.i18n import _
from ddpkit.sim import host
from ddpkit.sim.spec import DEFAULT_NAME, SimSpec, validate_name
from ddpkit.sim.state import (
    PHASE_UP,
    ClusterState,
    read_state,
    sim_lock,
    write_state,
)
from ddpkit.sim.steps import Step
from ddpkit.sim.teardown import DownReport, present_pieces, teardown
from ddpkit.sim.topology import (
    NETNS_DIR,
    SimCluster,
    build_cluster,
    namespace_name,
    owned_link_pattern,
    owned_namespace_pattern,
    plan_up,
    probe_namespace_name,
    tools_for_up,
)

CommandRunner = host.CommandRunner
LINKS_UP_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class UpResult:
    cluster: SimCluster
    created: bool  # False: an identical cluster was already up and nothing was done
    steps: tuple[Step, ...]  # the steps that ran


@dataclass(frozen=True)
class SimStatus:
    """A cluster as found: ``phase`` is up, building (an ``up`` in progress or killed), damaged
    (pieces missing), leftovers (pieces but no state file) or absent."""

    name: str
    phase: str
    cluster: SimCluster | None
    processes: Mapping[int, int]  # node index -> processes inside that node now
    steps_done: int
    missing: tuple[str, ...]
    present: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.phase,
            "cluster": self.cluster.to_dict() if self.cluster else None,
            "processes": {str(index): count for index, count in sorted(self.processes.items())},
            "steps_done": self.steps_done,
            "missing": list(self.missing),
            "present": list(self.present),
        }


# -- up ------------------------------------------------------------------------------------------


def up(spec: SimSpec, *, euid: int | None = None) -> SimCluster:
    """Bring ``spec``'s cluster up (a no-op when the same cluster is up already)."""
    return bring_up(spec, euid=euid).cluster


def bring_up(
    spec: SimSpec,
    *,
    euid: int | None = None,
    tools: host.Tools | None = None,
    run: CommandRunner = host.run_command,
) -> UpResult:
    """``up`` with the details: whether anything was created, and which steps ran.

    A step that fails (or Ctrl-C) removes everything built so far before the error propagates.
    """
    host.require_root(euid, action="ddpkit sim up")
    tools = tools or host.find_tools({"ip", "umount", *tools_for_up(spec)})
    cluster = build_cluster(spec)
    with sim_lock():
        state = read_state(spec.name)
        if state is not None:
            _check_existing(state, spec)
            return UpResult(cluster, created=False, steps=())
        present = present_pieces(spec.name)
        if present:
            raise ConfigError(
                "sim-leftovers",
                _("pieces of a sim cluster {name} exist without its state file: {pieces}",
                  name=spec.name, pieces=", ".join(present)),
                _("remove them with `ddpkit sim down --name {name}`, then run up again",
                  name=spec.name),
            )
        if spec.private_network:
            host.check_subnet_free(tools, spec.network, spec.name)
        if spec.needs_netem:
            _require_netem(tools, run, spec.name)
        steps = plan_up(spec)
        try:
            for done, step in enumerate(steps):
                write_state(ClusterState(spec, "building", done))
                _apply(step, done, len(steps), tools, run, spec.name)
            _wait_links_up(cluster, tools, run)
            write_state(ClusterState(spec, PHASE_UP, len(steps)))
        except BaseException:
            with contextlib.suppress(Exception):
                teardown(spec.name, tools, run)
            raise
    return UpResult(cluster, created=True, steps=steps)


def _check_existing(state: ClusterState, spec: SimSpec) -> None:
    name = spec.name
    if state.spec != spec:
        raise ConfigError(
            "sim-exists-different",
            _("sim cluster {name} is already up with another spec ({spec}; asked: {asked})",
              name=name, spec=_describe(state.spec), asked=_describe(spec)),
            _("tear it down first with `ddpkit sim down --name {name}`, or pick another --name",
              name=name),
        )
    if state.phase != PHASE_UP:
        raise ConfigError(
            "sim-half-built",
            _("sim cluster {name} is half-built ({steps} steps done; its up was stopped)",
              name=name, steps=state.steps_done),
            _("remove it with `ddpkit sim down --name {name}`, then run up again", name=name),
        )
    missing = _missing_pieces(build_cluster(spec))
    if missing:
        raise ConfigError(
            "sim-damaged",
            _("sim cluster {name} is recorded as up but lacks {missing}", name=name,
              missing=", ".join(missing)),
            _("rebuild it: `ddpkit sim down --name {name}` then up again", name=name),
        )


def _describe(spec: SimSpec) -> str:
    parts = [f"{spec.nodes} nodes", spec.subnet]
    parts += [f"rate {spec.rate}"] if spec.rate else []
    parts += [f"delay {spec.delay}"] if spec.delay else []
    parts += [f"loss {spec.loss}"] if spec.loss else []
    parts += [f"node {i} NIC {n}" for i, n in sorted(spec.ifnames.items())]
    parts += [] if spec.private_network else ["no private network"]
    return ", ".join(parts)


def _apply(step: Step, done: int, total: int, tools: host.Tools, run: CommandRunner,
           name: str) -> None:
    if step.argv:
        proc = run(tools, step.argv)
        if proc.returncode == 0:
            return
        reason = (proc.stderr or proc.stdout).strip() or f"exit status {proc.returncode}"
    else:
        try:
            _write(step.path, step.content)
            return
        except OSError as exc:
            reason = str(exc)
    raise EnvironmentProblem(
        "sim-step-failed",
        _("sim up {name}: step {number}/{total} ({summary}) failed: `{command}`: {reason}",
          name=name, number=done + 1, total=total, summary=step.summary, command=step.shell(),
          reason=reason),
        _("everything built so far was removed again; fix the cause named above and rerun up "
          "(`ddpkit sim up ... --dry-run` lists every step)"),
        details={"step": step.to_dict(), "index": done},
    )


def _wait_links_up(cluster: SimCluster, tools: host.Tools, run: CommandRunner) -> None:
    """Return only once every node's eth0 and private NIC report carrier (the kernel's link watch
    takes up to a second), so a caller's first packet is not lost to a link still coming up."""
    deadline = time.monotonic() + LINKS_UP_TIMEOUT_S
    waiting = list(cluster.nodes)
    while waiting:
        node = waiting[0]
        proc = run(tools, ["ip", "-n", node.namespace, "-j", "link", "show"])
        try:
            states = {link.get("ifname"): link.get("operstate") for link in json.loads(proc.stdout)}
        except (json.JSONDecodeError, AttributeError, TypeError):
            states = {}
        nics = (node.public_ifname, node.private_ifname) if node.private else (node.public_ifname,)
        if all(states.get(nic) == "UP" for nic in nics):
            waiting.pop(0)
            continue
        if time.monotonic() > deadline:
            raise DeadlineExceeded(
                "sim-links-down",
                _("{namespace}'s links did not come up within {seconds:.0f}s (states: {states})",
                  namespace=node.namespace, seconds=LINKS_UP_TIMEOUT_S, states=str(states)),
                _("check `dmesg` for veth errors; everything built was removed again"),
            )
        time.sleep(0.05)


def _write(path: str, content: str) -> None:
    if path.startswith("/proc/"):
        with open(path, "w", encoding="ascii") as handle:
            handle.write(content)
        return
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    replace_file(path, content)


def _require_netem(tools: host.Tools, run: CommandRunner, name: str) -> None:
    """Probe ``tc netem`` in a scratch namespace before building anything."""
    probe = probe_namespace_name(name)
    created = run(tools, ["ip", "netns", "add", probe])
    if created.returncode != 0:
        raise EnvironmentProblem(
            "sim-step-failed", _("cannot create probe namespace {probe}: {reason}", probe=probe,
                                 reason=created.stderr.strip()),
            _("run `ddpkit sim down --name {name}` and retry", name=name),
        )
    try:
        proc = run(tools, ["tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", "netem",
                           "delay", "1ms"])
    finally:
        run(tools, ["ip", "netns", "del", probe])
    if proc.returncode != 0:
        raise EnvironmentProblem(
            "netem-unavailable",
            _("this kernel has no tc netem qdisc (sch_netem), so --delay/--loss cannot be "
              "modelled (tc said: {reason})", reason=proc.stderr.strip() or proc.returncode),
            _("drop --delay/--loss (--rate uses tbf and works without netem), or load the module "
              "with `modprobe sch_netem` where the kernel ships it"),
        )


# -- down ----------------------------------------------------------------------------------------


def down(name: str = DEFAULT_NAME, *, euid: int | None = None) -> DownReport:
    """Remove every process, namespace, link, hosts dir and file of cluster ``name``."""
    validate_name(name)
    host.require_root(euid, action="ddpkit sim down")
    tools = host.find_tools({"ip", "umount"})
    with sim_lock():
        return teardown(name, tools, host.run_command)


# -- status --------------------------------------------------------------------------------------


def inspect(name: str = DEFAULT_NAME, *, euid: int | None = None) -> SimStatus:
    """What of cluster ``name`` exists now, with live process counts per node."""
    validate_name(name)
    host.require_root(euid, action="ddpkit sim status")
    present = tuple(present_pieces(name))
    try:
        state = read_state(name)
    except ConfigError:
        return SimStatus(name, "damaged", None, {}, 0, ("a readable state file",), present)
    if state is None:
        phase = "leftovers" if present else "absent"
        return SimStatus(name, phase, None, {}, 0, (), present)
    cluster = build_cluster(state.spec)
    missing = tuple(_missing_pieces(cluster)) if state.phase == PHASE_UP else ()
    phase = "damaged" if missing else state.phase
    inodes = {
        node.index: inode
        for node in cluster.nodes
        if (inode := host.namespace_inode(f"{NETNS_DIR}/{node.namespace}")) is not None
    }
    pids = host.processes_in_namespaces(inodes.values())
    counts = {index: sum(1 for i in pids.values() if i == inode) for index, inode in inodes.items()}
    return SimStatus(name, phase, cluster, counts, state.steps_done, missing, present)


def status(name: str = DEFAULT_NAME, *, euid: int | None = None) -> SimCluster | None:
    """The cluster ``name`` when it is fully up, else None."""
    found = inspect(name, euid=euid)
    return found.cluster if found.phase == PHASE_UP else None


def _missing_pieces(cluster: SimCluster) -> list[str]:
    namespaces = set(host.namespaces_matching(owned_namespace_pattern(cluster.name)))
    links = set(host.host_links_matching(owned_link_pattern(cluster.name)))
    missing = [] if cluster.void_namespace in namespaces else [f"namespace {cluster.void_namespace}"]
    private = cluster.spec.private_network
    missing += [] if cluster.bridge in links or not private else [f"link {cluster.bridge}"]
    for node in cluster.nodes:
        if namespace_name(cluster.name, node.index) not in namespaces:
            missing.append(f"namespace {node.namespace}")
        if node.host_private_peer not in links and private:
            missing.append(f"link {node.host_private_peer}")
        if host.namespace_inode(node.uts_file) is None:
            missing.append(f"hostname namespace {node.uts_file}")
    return missing


