"""Machines compared side by side (issue 12): what each one's init showed, across ranks and files.

Reads :class:`~ddpkit.doctor.log.init_model.InitModel` (one parser for the init sequence) plus the
NCCL_* settings and host addresses the diagnosis keeps, and reports:

- ``version-mismatch``: the ranks run different NCCL releases, or the machines run different torch
  builds (torch bundles NCCL);
- ``node-mismatch``: the machines chose different NCCL transports (``Using network IB`` on one,
  ``Socket`` on another), loaded different net plugins (one the internal one), were started with
  different NCCL_* settings, or two machines share one hostname.

A plugin line is informational on its own: a plugin difference is reported only when the job
also failed or its init hung, and never turns a working log into a failure.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding, Severity
from ddpkit.doctor.log.evidence import Bag, display_origin, merge
from ddpkit.doctor.log.init_model import InitModel, Reported
from ddpkit.doctor.wording import specific_then_general
from ddpkit.i18n import _
from ddpkit.wording import clauses


def _side_by_side(reported: Reported) -> str:
    """``ib-node-0: IB; ib-node-1: Socket``: what each machine used first."""
    return clauses([_("{host}: {value}", host=display_origin(origin), value=value)
                   for origin, value in sorted(reported.first.items())])


def versions(init: InitModel, driver: Bag | None, trouble: bool) -> Finding | None:
    """Different NCCL releases among the ranks, different torch builds among the machines, or a
    CUDA runtime newer than the driver (``driver``: the lines saying so)."""
    e = entry("version-mismatch")
    parts: list[str] = []
    bags: list[Bag] = []
    severity: Severity = "error"
    if len(init.nccl.values()) > 1:
        parts.append(_("Different NCCL versions are in use: {listing}.",
                       listing=init.nccl.listing()))
        bags += init.nccl.evidence()
    if init.torch.per_machine_differs():
        parts.append(_("The machines run different torch builds: {listing}; each build bundles "
                       "its own NCCL, and torch.distributed expects one release everywhere.",
                       listing=init.torch.listing()))
        bags += init.torch.evidence()
    if driver:
        parts.append(_("The CUDA runtime needs a newer NVIDIA driver than this node has."))
        bags.append(driver)
    if not parts:
        return None
    if not trouble and not driver and len(init.nccl.values()) < 2:
        severity = "warning"  # torch builds differ, nothing failed (yet)
    return Finding(e.id, severity, e.title, specific_then_general(parts, e.explanation), e.fix,
                   merge(*(b.items for b in bags)))


def node_mismatch(
    init: InitModel,
    env: dict[str, dict[str, str]],
    env_bag: Bag,
    host_addresses: dict[str, set[tuple[str, str, str]]],
    host_bag: Bag,
    per_node_vars: frozenset[str],
    trouble: bool,
) -> Finding | None:
    """Differences between machines: NCCL transport and net plugin, NCCL_* settings, shared
    hostnames. ``trouble``: the job failed or its init hung (a difference is then its likely
    cause, an error ranked above the failure it explains)."""
    e = entry("node-mismatch")
    parts: list[str] = []
    bags: list[Bag] = []
    differs = False
    if init.network.per_machine_differs():
        parts.append(_("The nodes use different NCCL transports ({sides}): NCCL needs the same "
                       "network on every rank, a mix hangs or fails in init.",
                       sides=_side_by_side(init.network)))
        bags += init.network.evidence()
        differs = True
    if trouble and init.plugin.per_machine_differs():
        parts.append(_("The nodes load different NCCL net plugins ({sides}).",
                       sides=_side_by_side(init.plugin)))
        bags += init.plugin.evidence()
        differs = True
    settings = _differing_settings(init, env, per_node_vars)
    if settings:
        parts.append(_("NCCL settings differ between nodes: {settings}.",
                       settings="; ".join(settings[:6])))
        bags.append(env_bag)
    shared = _shared_hostnames(host_addresses)
    if shared:
        parts += shared
        bags.append(host_bag)
    if not parts:
        return None
    severity: Severity = "error" if trouble and differs else "warning"
    return Finding(e.id, severity, e.title, specific_then_general(parts, e.explanation), e.fix,
                   merge(*(b.items for b in bags)))


def _differing_settings(init: InitModel, env: dict[str, dict[str, str]],
                        per_node_vars: frozenset[str]) -> list[str]:
    """NCCL_* variables set differently. NCCL logs every NCCL_* variable it reads, so one missing
    from a machine whose NCCL INFO output was seen is unset there."""
    nccl_origins = set(init.network.first.data) | {
        o for o in init.nccl.machines() if not o.startswith("file:")}
    compared = sorted(set(env) | nccl_origins)
    if len(compared) < 2 or not env:
        return []
    names = sorted({var for values in env.values() for var in values} - per_node_vars)
    differing = []
    for var in names:
        per_origin = {o: env.get(o, {}).get(var, "(unset)") for o in compared}
        if len(set(per_origin.values())) > 1:
            differing.append(f"{var}: " + ", ".join(f"{o}={v}"
                                                    for o, v in sorted(per_origin.items())))
    return differing


def _shared_hostnames(host_addresses: dict[str, set[tuple[str, str, str]]]) -> list[str]:
    parts: list[str] = []
    for host, seen in sorted(host_addresses.items()):
        by_name: dict[str, set[str]] = {}
        files: set[str] = set()
        for file, name, address in seen:
            by_name.setdefault(name, set()).add(address)
            files.add(file)
        clash = sorted(name for name, addresses in by_name.items() if len(addresses) > 1)
        if clash and len(files) > 1:
            addresses = ", ".join(sorted(by_name[clash[0]]))
            parts.append(_("Different machines share the hostname {host} ({name} is "
                           "{addresses}): anything that goes by hostname (torchrun's c10d "
                           "rendezvous, MASTER_ADDR) can reach the wrong one.", host=host,
                           name=clash[0], addresses=addresses))
    return parts
