"""Pure planning: launch config + this node's facts -> what to run, with which env, and why."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ddpkit.errors import ConfigError, NetworkProblem, UsageError
from ddpkit.i18n import _
from ddpkit.launch.config import FLIGHT_RECORDER_DIR, LaunchConfig, LocalRankMode
from ddpkit.launch.envpass import shown_env
from ddpkit.launch.job import JobSpec, node_argv
from ddpkit.launch.torchrun.command import (
    LOCAL_RANK_MACRO,
    gated,
    quote_command,
    torchrun_argv,
)
from ddpkit.launch.torchrun.local_rank import AUTO, OWN_WORKER, EntrySource, LocalRankChoice, decide
from ddpkit.ncclconf.ifname import matching_interfaces
from ddpkit.net.interfaces import Nic, NicKind, interface_holding
from ddpkit.net.isolation import peer_addresses, unreachable_why
from ddpkit.net.route import LOOPBACK_NAMES, Route
from ddpkit.net.select import find_interface, socket_env, traps
from ddpkit.wording import either

DEBUG_ENV = {
    "NCCL_DEBUG": "INFO",
    "NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,NET",
    "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
}
FLIGHT_RECORDER_ENTRIES = "2000"
# the names flight_recorder_env sets, on every torch (shown as one family by default)
FLIGHT_RECORDER_PREFIXES = ("TORCH_FR_", "TORCH_NCCL_TRACE_", "TORCH_NCCL_DEBUG_INFO_",
                            "TORCH_NCCL_DUMP_ON_TIMEOUT")


def flight_recorder_env(run_dir: str, torch_version: str | None) -> dict[str, str]:
    """torch's flight recorder for the workers while a hang timeout is on: a ring of the last
    collectives per process group, dumped (on NCCL's watchdog timeout) into the run directory,
    where `python -m torch.distributed.flight_recorder.fr_trace` reads it. torch >= 2.8 reads the
    TORCH_FR_* names (and warns that the TORCH_NCCL_* ones are deprecated), earlier ones only the
    TORCH_NCCL_* names."""
    prefix = f"{run_dir}/{FLIGHT_RECORDER_DIR}/rank_"
    # the watchdog writes the dump on a collective timeout only with DUMP_ON_TIMEOUT (its default
    # has changed across releases; the name has not)
    dump = {"TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}
    if _older_than(torch_version, (2, 8)):
        return {"TORCH_NCCL_TRACE_BUFFER_SIZE": FLIGHT_RECORDER_ENTRIES,
                "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": prefix, **dump}
    return {"TORCH_FR_BUFFER_SIZE": FLIGHT_RECORDER_ENTRIES, "TORCH_FR_DUMP_TEMP_FILE": prefix,
            **dump}


def _older_than(version: str | None, wanted: tuple[int, int]) -> bool:
    parts = (version or "").split(".")
    try:
        return (int(parts[0]), int(parts[1])) < wanted
    except (IndexError, ValueError):
        return False  # unknown: assume a current torch


@dataclass(frozen=True)
class NodeFacts:
    """What was observed on this node (gathered by :mod:`ddpkit.launch.node.facts`)."""

    hostname: str
    nics: tuple[Nic, ...]
    master_addresses: tuple[str, ...]  # what --master-addr resolved to
    route: Route | None  # this node's route to the master (None when not looked up)
    nccl_file_settings: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # ^ NCCL_* name -> (value, file path) for settings that come from nccl.conf files
    entry_source: EntrySource | None = None  # the script's source, when auto decides from it
    torch_version: str | None = None  # the installed torch's, e.g. "2.13.0+cpu"
    entry_problem: str | None = None  # why the script or module cannot run here (entry_check)


# Where the inter-node interface came from: --ifname, the environment, the route to the master,
# the interface holding the master address (on the master), or loopback (one node).
ChoiceSource = Literal["flag", "env", "route", "master-address", "loopback"]


@dataclass(frozen=True)
class InterfaceChoice:
    ifname: str
    address: str
    source: ChoiceSource
    reason: str


@dataclass(frozen=True)
class NodePlan:
    config: LaunchConfig
    hostname: str
    interface: InterfaceChoice
    argv: tuple[str, ...]
    env: Mapping[str, str]  # the complete env of torchrun and its workers
    env_set: Mapping[str, str]  # what ddpkit set or changed, for display
    warnings: tuple[str, ...]
    peer_commands: tuple[str, ...]  # on the master: what to run on every other node
    run_dir: str
    local_rank: LocalRankChoice = field(
        default_factory=lambda: LocalRankChoice(OWN_WORKER, None, "not decided"))
    log_dir: str = ""  # torchrun's --log-dir (ddpkit's <run dir>/torchrun unless the user gave one)
    entry_problem: str | None = None  # the entry cannot run here: execute stops before waiting

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_rank": self.config.node_rank,
            "nnodes": self.config.nnodes,
            "hostname": self.hostname,
            "master": f"{self.config.master_addr}:{self.config.master_port}",
            "interface": {
                "name": self.interface.ifname,
                "address": self.interface.address,
                "source": self.interface.source,
                "reason": self.interface.reason,
            },
            "argv": list(self.argv),
            "env_set": shown_env(self.env_set),
            "warnings": list(self.warnings),
            "peer_commands": list(self.peer_commands),
            "run_dir": self.run_dir,
            "log_dir": self.log_dir,
            "local_rank_arg": self.local_rank.to_dict(),
            "notes": list(self.config.notes),
            "cluster_sources": dict(self.config.cluster_sources),
        }


def choose_interface(config: LaunchConfig, facts: NodeFacts) -> InterfaceChoice:
    """The interface this node uses to talk to its peers, and why."""
    if config.multi_node and not config.is_master:
        check_master_not_own(config, facts)
    if config.ifname:
        nic = find_interface(config.ifname, facts.nics)
        return InterfaceChoice(nic.name, _first_address(nic), "flag",
                               _("--ifname {name}", name=nic.name))
    if not config.multi_node:
        return InterfaceChoice("lo", "127.0.0.1", "loopback", _("single node: peers are local"))
    if config.master_addr in LOOPBACK_NAMES:
        return InterfaceChoice("lo", "127.0.0.1", "loopback",
                               _("the master address {address} is loopback: every node must "
                                 "be on this machine", address=config.master_addr))
    if config.is_master:
        for address in facts.master_addresses:
            holder = interface_holding(address, facts.nics)
            if holder is not None:
                check_master_reachable(config, address, holder, facts.nics)
                return InterfaceChoice(holder.name, address, "master-address",
                                       _("{name} holds the master address {address}",
                                         name=holder.name, address=address))
        shown = ", ".join(facts.master_addresses) or config.master_addr
        raise ConfigError(
            "master-not-local",
            _("this is node 0 (the master) but --master-addr {master} ({shown}) is not an "
              "address of this machine", master=config.master_addr, shown=shown),
            _("on the master, pass its own private address, {suggested}; or run this command "
              "with --node-rank 1.. on a worker", suggested=_suggested(facts.nics)),
            details={"private_addresses": [a for _n, a in peer_addresses(facts.nics)]},
        )
    if facts.route is None:
        raise NetworkProblem("no-route", _("no route to the master {master} was looked up",
                                           master=config.master_addr),
                             _("check `ddpkit nics --to {master}`", master=config.master_addr))
    route = facts.route
    if route.gateway:  # a typo'd or public master address goes this way; so do some clouds' VPCs
        return InterfaceChoice(route.ifname, route.source, "route",
                               _("{address} is on none of this machine's networks: the routing "
                                 "table sends it through gateway {gateway} on {name} (source "
                                 "{source})", address=route.address, gateway=route.gateway,
                                 name=route.ifname, source=route.source))
    return InterfaceChoice(route.ifname, route.source, "route",
                           _("the routing table reaches {address} via {name} (source {source})",
                             address=route.address, name=route.ifname, source=route.source))


def check_master_not_own(config: LaunchConfig, facts: NodeFacts) -> None:
    """On a worker: ``--master-addr`` must not be this machine's own (non-loopback) address.

    That is the guide's trap: every instance shows the same container address (172.17.0.4 on
    eth0), so a worker given "the master's" address from the master's `ifconfig` holds it too,
    dials itself and is refused until its timeouts end. An address every node shares is one
    every worker holds, so this check finds it too, at once. ConfigError
    ``master-address-shared``."""
    if config.master_addr in LOOPBACK_NAMES:
        return
    for address in facts.master_addresses:
        holder = interface_holding(address, facts.nics)
        if holder is None or _is_loopback(address):
            continue
        raise ConfigError(
            "master-address-shared",
            _("--master-addr {master} is this machine's own address ({address} on {name}), but "
              "this is node {rank}, not the master: it would wait for itself; a container/NAT "
              "address that every instance has (such as 172.17.0.4 on eth0) reaches no other "
              "machine", master=config.master_addr, address=address, name=holder.name,
              rank=config.node_rank),
            _("give the master's private-network address: run `ddpkit nics` on the master "
              "(node 0) and use the address it recommends, on every node"),
            details={"address": address, "interface": holder.name})


def check_master_reachable(config: LaunchConfig, address: str, holder: Nic,
                           nics: Sequence[Nic]) -> None:
    """On the master: ``--master-addr`` must be an address other machines reach. One on a
    container's NAT interface (172.17.0.4 on eth0, the same on every instance) is the guide's
    trap seen from node 0: every worker holds it too and stops with ``master-address-shared``,
    while the master would wait for them until --rdzv-timeout. Same error, at once."""
    if holder.kind is NicKind.LOOPBACK or _is_loopback(address):
        return
    why = unreachable_why(holder, nics)
    if why is None:
        return
    raise ConfigError(
        "master-address-shared",
        _("--master-addr {master} is on this machine's {name}, {why}: no other node can reach "
          "the master there", master=config.master_addr, name=holder.name, why=why)
        if address == config.master_addr else
        _("--master-addr {master} is this machine's {address} on {name}, {why}: no other node "
          "can reach the master there", master=config.master_addr, address=address,
          name=holder.name, why=why),
        _("give the master's private-network address on every node, {suggested}",
          suggested=_suggested(nics)),
        details={"address": address, "interface": holder.name,
                 "private_addresses": [a for _n, a in peer_addresses(nics)]})


def _suggested(nics: Sequence[Nic]) -> str:
    """``e.g. --master-addr 10.0.0.2 (eth1)`` from this machine's reachable addresses."""
    found = peer_addresses(nics)
    if not found:
        return _("see `ddpkit nics`")
    return _("e.g. --master-addr {choices} (see `ddpkit nics`)",
             choices=either([f"{address} ({name})" for name, address in found]))


def _is_loopback(address: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def plan_node(
    config: LaunchConfig,
    facts: NodeFacts,
    base_env: Mapping[str, str],
    *,
    python: str,
    run_dir: str,
    peer_command: tuple[str, ...] | None = None,
) -> NodePlan:
    """The full plan for this node: interface, torchrun argv, the explicit worker env, warnings.

    ``peer_command`` is the ddpkit command other nodes run (``("test", "--quick")``); by default
    ``launch`` with this node's entry and arguments.
    """
    choice = choose_interface(config, facts)
    warnings = list(_interface_warnings(choice, facts))
    if facts.entry_problem:
        warnings.append(_("the entry cannot run here: {why}", why=facts.entry_problem))
    if config.multi_node and config.master_addr in LOOPBACK_NAMES:
        warnings.append(
            _("--nnodes {nnodes} with master {master}: a loopback address reaches only this "
              "machine, so nodes on other machines cannot join; pass the master's private "
              "address (see `ddpkit nics`), or leave --master-addr out for a join token",
              nnodes=config.nnodes, master=config.master_addr))
    env_set: dict[str, str] = {}
    if choice.source != "loopback":
        wanted = socket_env(choice.ifname)
        for key, value in wanted.items():
            user_value = base_env.get(key)
            if choice.source != "flag" and user_value is not None:
                warnings.extend(_user_setting_warnings(key, user_value, choice, facts))
                continue
            if (choice.source != "flag" and key in facts.nccl_file_settings
                    and key.startswith("NCCL_")):
                file_value, path = facts.nccl_file_settings[key]
                warnings.extend(_user_setting_warnings(key, file_value, choice, facts, path))
                continue
            env_set[key] = value
    if config.debug:
        env_set.update(DEBUG_ENV)
    if config.hang_timeout > 0:  # the user's own settings win
        recorder = flight_recorder_env(run_dir, facts.torch_version)
        env_set.update({k: v for k, v in recorder.items() if k not in base_env})
    env_set.update(dict(config.extra_env))
    env = {**dict(base_env), **env_set}
    local_addr = choice.address if choice.source != "loopback" else None
    local_rank = local_rank_choice(config, facts)
    if local_rank.warning:
        warnings.append(local_rank.warning)
    log_dir = config.torchrun_option("--log-dir") or f"{run_dir}/torchrun"
    argv = torchrun_argv(python, config, local_addr=local_addr, log_dir=log_dir,
                         local_rank_arg=local_rank.argument(LOCAL_RANK_MACRO),
                         gate=gated(config, env))
    return NodePlan(
        config=config,
        hostname=facts.hostname,
        interface=choice,
        argv=tuple(argv),
        env=env,
        env_set=env_set,
        warnings=tuple(warnings),
        peer_commands=peer_commands(config, peer_command),
        run_dir=run_dir,
        local_rank=local_rank,
        log_dir=log_dir,
        entry_problem=facts.entry_problem,
    )


def local_rank_choice(config: LaunchConfig, facts: NodeFacts) -> LocalRankChoice:
    """The legacy local-rank argument for this node's ranks; UsageError when it cannot work."""
    choice = decide(config.local_rank_arg, facts.entry_source, config.entry_args,
                    use_env=config.use_env)
    if choice.flag and config.has_torchrun_option("--virtual-local-rank"):
        raise UsageError(
            "virtual-local-rank-conflict",
            _("--virtual-local-rank gives every rank LOCAL_RANK=0 and one visible GPU, but the "
              "script gets {flag}=<its real local rank> ({reason}), which names a GPU it cannot "
              "see", flag=choice.flag, reason=choice.reason),
            _("drop --virtual-local-rank, or make the script read os.environ['LOCAL_RANK'] and "
              "pass --local-rank-arg none"))
    return choice


def option_flags(local_rank_arg: LocalRankMode, use_env: bool,
                 torchrun_options: Sequence[tuple[str, str | None]]) -> list[str]:
    """The launch-only flags every node repeats: the local-rank argument and torchrun's flags
    (not --local-addr: each node has its own address)."""
    flags = [] if local_rank_arg in (AUTO, OWN_WORKER) else ["--local-rank-arg", local_rank_arg]
    if use_env:
        flags.append("--use-env")
    for flag, value in torchrun_options:
        if flag != "--local-addr":
            flags.append(flag if value is None else f"{flag}={value}")
    return flags


def peer_commands(config: LaunchConfig, command: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """On the master: the command every other node runs (each picks its own interface). The job
    goes through :func:`ddpkit.launch.job.node_argv`, like the ssh fan-out and the join token;
    secret-looking ``--env`` values are masked (the user fills them in on each node)."""
    if not config.is_master or not config.multi_node:
        return ()
    if command is None:
        tail = ["-m"] if config.is_module else []
        flags = option_flags(config.local_rank_arg, config.use_env, config.torchrun_options)
        command = ("launch", *flags, *tail, config.entry, *config.entry_args)
    spec = JobSpec.from_config(command[0], config, entry=command[1:])
    return tuple(quote_command(["ddpkit", *node_argv(spec, rank, config.master_addr,
                                                     for_display=True)])
                 for rank in range(1, config.nnodes))


def _first_address(nic: Nic) -> str:
    for address in (*nic.ipv4, *nic.ipv6):
        return address.address
    raise ConfigError("interface-has-no-address", _("interface {name} has no IP address",
                                                    name=nic.name),
                      _("bring it up with an address, or pick another with --ifname (see "
                        "`ddpkit nics`)"))


def _interface_warnings(choice: InterfaceChoice, facts: NodeFacts) -> list[str]:
    nic = next((n for n in facts.nics if n.name == choice.ifname), None)
    if nic is None or choice.source == "loopback":
        return []
    return [_("{name}: {trap}", name=nic.name, trap=trap.message)
            for trap in traps(nic, facts.nics)]


def _user_setting_warnings(
    key: str, value: str, choice: InterfaceChoice, facts: NodeFacts, path: str | None = None
) -> list[str]:
    where = (_("{key}={value} (from {path})", key=key, value=value, path=path) if path else
             _("{key}={value} (from your environment)", key=key, value=value))
    names = [n.name for n in facts.nics]
    if key.startswith("NCCL_"):
        selected: Sequence[str] = matching_interfaces(value, names)
    else:
        selected = [v for v in value.split(",") if v in names]
    if not selected:
        return [_("{where} matches no interface on this machine ({names}); ddpkit would use "
                  "{ifname} ({reason})", where=where, names=", ".join(names),
                  ifname=choice.ifname, reason=choice.reason)]
    if choice.ifname not in selected:
        return [_("{where} selects {selected}, but {reason}: peers may be unreachable; unset it "
                  "or set it to {ifname}", where=where, selected=", ".join(selected),
                  reason=choice.reason, ifname=choice.ifname)]
    if len(selected) > 1:
        return [_("{where} matches several interfaces ({selected}); NCCL bootstraps on the first "
                  "one only: prefer the exact form {key}=={ifname}", where=where,
                  selected=", ".join(selected), key=key, ifname=choice.ifname)
                if key.startswith("NCCL_") else
                _("{where} names several interfaces; every node must name the same count",
                  where=where)]
    return []
