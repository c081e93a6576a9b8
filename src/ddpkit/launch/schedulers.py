"""The cluster shape from the scheduler or platform a node runs under, read from its environment.

Inside a Slurm allocation, a Kubeflow PyTorchJob pod (or any launcher that exported torchrun's
``MASTER_ADDR``/``PET_*`` variables), a RunPod instant cluster or a SkyPilot cluster, each node
already knows the node count, its own rank, the master and often its process count. ``detect``
turns one environment into a :class:`Layout` (each field with the variable it came from) plus the
traps worth naming; ``merge_flags`` lays it under the flags the user gave (a flag that disagrees
with the allocation is an error, never silently overridden). Pure: the environment, the host-name
resolver and the ``scontrol`` runner are passed in.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ddpkit.errors import ConfigError, DdpkitError, UsageError
from ddpkit.i18n import _

SLURM, PYTORCHJOB, TORCH_ENV, RUNPOD, SKYPILOT = "Slurm", "PyTorchJob", "env", "RunPod", "SkyPilot"
# Fields a flag may change without contradicting the allocation: fewer ranks than GPUs, or
# another port, are choices; another node count, rank or master would be a different job.
OVERRIDABLE = frozenset({"nproc_per_node", "master_port"})
MAX_HOSTLIST = 65536  # hosts a compressed Slurm list may expand to before it is refused

Resolver = Callable[[str], str]  # host name -> address; raises OSError or a DdpkitError when not
HostnamesRunner = Callable[[str], "Sequence[str] | None"]  # `scontrol show hostnames LIST`


@dataclass(frozen=True)
class Layout:
    """What the environment says about the job; ``sources`` names, per field, where it came from."""

    scheduler: str
    nnodes: int
    node_rank: int
    master_addr: str
    master_port: int | None = None
    nproc_per_node: str | None = None
    sources: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # traps noticed that do not stop the job

    def fields(self) -> dict[str, object]:
        values: dict[str, object] = {"nnodes": self.nnodes, "node_rank": self.node_rank,
                                     "master_addr": self.master_addr}
        if self.master_port is not None:
            values["master_port"] = self.master_port
        if self.nproc_per_node is not None:
            values["nproc_per_node"] = self.nproc_per_node
        return values


def detect(env: Mapping[str, str], *, resolve: Resolver,
           hostnames: HostnamesRunner | None = None) -> Layout | None:
    """The layout of the first scheduler whose variables are set (Slurm, a torchrun-style
    environment such as a PyTorchJob's, RunPod, SkyPilot), or None outside all of them."""
    if env.get("SLURM_JOB_ID") and env.get("SLURM_NNODES"):
        return _slurm(env, resolve, hostnames)
    if env.get("MASTER_ADDR") and (env.get("PET_NNODES") or env.get("WORLD_SIZE")):
        return _torch_env(env)
    if env.get("PRIMARY_ADDR") and env.get("NUM_NODES"):
        return _runpod(env)
    if env.get("SKYPILOT_NODE_IPS") and env.get("SKYPILOT_NODE_RANK"):
        return _skypilot(env)
    return None


# --- Slurm ---------------------------------------------------------------------------------------


def _slurm(env: Mapping[str, str], resolve: Resolver, hostnames: HostnamesRunner | None) -> Layout:
    nnodes = _count(env, "SLURM_NNODES", SLURM)
    node_rank = _count(env, "SLURM_NODEID", SLURM, minimum=0)
    listed_var = "SLURM_JOB_NODELIST" if env.get("SLURM_JOB_NODELIST") else "SLURM_NODELIST"
    listed = env.get(listed_var, "")
    if not listed:
        raise ConfigError("bad-scheduler-env", _("Slurm: SLURM_NNODES is set but no node list "
                                                  "(SLURM_JOB_NODELIST)"),
                          _("run ddpkit through srun inside the allocation"))
    hosts = list(hostnames(listed) or ()) if hostnames is not None else []
    how = "scontrol show hostnames"
    if not hosts:
        hosts, how = expand_hostlist(listed), _("its host list")
    first = hosts[0]
    try:
        master = resolve(first)
    except (OSError, DdpkitError) as exc:
        raise ConfigError("master-unresolvable", _("Slurm: the first node of the allocation, "
                                                    "{host}, does not resolve here ({error})",
                                                    host=first, error=str(exc)),
                          _("pass --master-addr with its private address")) from None
    step_tasks = env.get("SLURM_STEP_TASKS_PER_NODE") or ""
    if step_tasks and _first_count(step_tasks) > 1:
        raise UsageError("slurm-tasks-per-node", _(
            "Slurm: this step runs {count} tasks per node (SLURM_STEP_TASKS_PER_NODE={value}), "
            "so each node would start the job more than once",
            count=_first_count(step_tasks), value=step_tasks),
            _("start ddpkit once per node: srun --ntasks-per-node=1 ddpkit launch ..."))
    nproc, nproc_from = None, ""
    for name in ("SLURM_GPUS_ON_NODE", "SLURM_NTASKS_PER_NODE"):
        value = env.get(name, "")
        if value and _first_count(value) > 0:
            nproc, nproc_from = str(_first_count(value)), name
            break
    notes = []
    launch_host = env.get("SLURM_LAUNCH_NODE_IPADDR")
    if launch_host and launch_host != master:
        notes.append(_("SLURM_LAUNCH_NODE_IPADDR ({host}) is the host that ran srun, not a node of "
                       "the job: it is not used as the master", host=launch_host))
    sources = {"nnodes": "SLURM_NNODES", "node_rank": "SLURM_NODEID",
               "master_addr": _("first host of {name} ({host}, from {how}), resolved",
                                name=listed_var, host=first, how=how)}
    if nproc:
        sources["nproc_per_node"] = nproc_from
    return Layout(SLURM, nnodes, node_rank, master, None, nproc, sources, tuple(notes))


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list (``node[01-04,07],gpu-a``) as host names, in order.

    Zero padding is kept (``node[08-10]`` gives node08, node09, node10); nested brackets such as
    ``rack[1-2]-node[1-2]`` expand as a product. ConfigError ``bad-hostlist`` names what is wrong.
    """
    hosts: list[str] = []
    for item in _split_top_level(text.strip()):
        hosts.extend(_expand_item(item, text))
        if len(hosts) > MAX_HOSTLIST:
            raise ConfigError("bad-hostlist", _("Slurm host list {text!r} expands to more than "
                                                  "{limit} hosts", text=text[:80],
                                                  limit=MAX_HOSTLIST),
                              _("check SLURM_JOB_NODELIST"))
    if not hosts:
        raise ConfigError("bad-hostlist", _("Slurm host list {text!r} names no host", text=text),
                          _("check SLURM_JOB_NODELIST"))
    return hosts


def _split_top_level(text: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ConfigError("bad-hostlist", _("Slurm host list {text!r}: unbalanced ']'",
                                                      text=text),
                                  _("check SLURM_JOB_NODELIST"))
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    if depth != 0:
        raise ConfigError("bad-hostlist", _("Slurm host list {text!r}: unbalanced '['", text=text),
                          _("check SLURM_JOB_NODELIST"))
    items.append(current)
    return [item.strip() for item in items if item.strip()]


def _expand_item(item: str, whole: str) -> list[str]:
    start = item.find("[")
    if start < 0:
        return [item]
    end = item.index("]", start)
    prefix, ranges, rest = item[:start], item[start + 1 : end], item[end + 1 :]
    values: list[str] = []
    for part in ranges.split(","):
        found = _RANGE.match(part.strip())
        if found is None:
            raise ConfigError("bad-hostlist", _("Slurm host list {text!r}: {part!r} is not a "
                                                  "number or a range", text=whole, part=part),
                              _("check SLURM_JOB_NODELIST"))
        low, high = found.group(1), found.group(2) or found.group(1)
        if int(high) < int(low) or int(high) - int(low) > MAX_HOSTLIST:
            raise ConfigError("bad-hostlist", _("Slurm host list {text!r}: bad range {part!r}",
                                                  text=whole, part=part),
                              _("check SLURM_JOB_NODELIST"))
        width = len(low) if low.startswith("0") else 0
        values.extend(str(n).zfill(width) for n in range(int(low), int(high) + 1))
    tails = _expand_item(rest, whole) if rest else [""]
    return [f"{prefix}{value}{tail}" for value in values for tail in tails]


def _first_count(text: str) -> int:
    """The leading count of a Slurm per-node value: ``4``, ``2(x3)``, ``4,2`` give 4, 2, 4."""
    found = re.match(r"\s*(\d+)", text)
    return int(found.group(1)) if found else 0


# --- torchrun-style environments (Kubeflow PyTorchJob), RunPod, SkyPilot --------------------------


def _torch_env(env: Mapping[str, str]) -> Layout:
    pods = "PET_NNODES" in env or "KUBERNETES_SERVICE_HOST" in env
    scheduler = PYTORCHJOB if pods else TORCH_ENV
    nnodes_var = "PET_NNODES" if env.get("PET_NNODES") else "WORLD_SIZE"
    raw = env[nnodes_var]
    low, sep, high = raw.partition(":")
    if sep and low != high:
        raise ConfigError("bad-scheduler-env", _("{scheduler}: {name}={value} is an elastic range",
                                                  scheduler=scheduler, name=nnodes_var, value=raw),
                          _("give the job a fixed number of nodes"))
    nnodes = _count({nnodes_var: low}, nnodes_var, scheduler)
    rank_var = "PET_NODE_RANK" if env.get("PET_NODE_RANK") else "RANK"
    node_rank = _count(env, rank_var, scheduler, minimum=0) if env.get(rank_var) else 0
    port = _count(env, "MASTER_PORT", scheduler) if env.get("MASTER_PORT") else None
    nproc = env.get("PET_NPROC_PER_NODE") or None
    sources = {"nnodes": nnodes_var, "node_rank": rank_var if env.get(rank_var) else "default",
               "master_addr": "MASTER_ADDR"}
    if port is not None:
        sources["master_port"] = "MASTER_PORT"
    if nproc:
        sources["nproc_per_node"] = "PET_NPROC_PER_NODE"
    notes = []
    if nnodes_var == "WORLD_SIZE" and pods:
        notes.append(_("WORLD_SIZE={value} here counts pods (one per node), not processes: inside "
                       "the job, torchrun sets WORLD_SIZE to the number of ranks", value=raw))
    return Layout(scheduler, nnodes, node_rank, _address(env, "MASTER_ADDR", scheduler), port,
                  nproc, sources, tuple(notes))


def _runpod(env: Mapping[str, str]) -> Layout:
    sources = {"nnodes": "NUM_NODES", "node_rank": "NODE_RANK", "master_addr": "PRIMARY_ADDR"}
    nproc = env.get("NUM_TRAINERS") or None
    if nproc:
        sources["nproc_per_node"] = "NUM_TRAINERS"
    return Layout(RUNPOD, _count(env, "NUM_NODES", RUNPOD),
                  _count(env, "NODE_RANK", RUNPOD, minimum=0),
                  _address(env, "PRIMARY_ADDR", RUNPOD), None, nproc, sources)


def _skypilot(env: Mapping[str, str]) -> Layout:
    ips = [line.strip() for line in env["SKYPILOT_NODE_IPS"].splitlines() if line.strip()]
    sources = {"nnodes": "SKYPILOT_NODE_IPS (count)", "node_rank": "SKYPILOT_NODE_RANK",
               "master_addr": "SKYPILOT_NODE_IPS (first)"}
    nproc = env.get("SKYPILOT_NUM_GPUS_PER_NODE") or None
    if nproc:
        sources["nproc_per_node"] = "SKYPILOT_NUM_GPUS_PER_NODE"
    return Layout(SKYPILOT, len(ips), _count(env, "SKYPILOT_NODE_RANK", SKYPILOT, minimum=0),
                  _address({"SKYPILOT_NODE_IPS": ips[0]}, "SKYPILOT_NODE_IPS", SKYPILOT), None,
                  nproc, sources)


def _count(env: Mapping[str, str], name: str, scheduler: str, *, minimum: int = 1) -> int:
    text = env.get(name, "")
    if not text.strip().isdigit() or int(text) < minimum:
        raise ConfigError("bad-scheduler-env", _("{scheduler}: {name}={value!r} is not a whole "
                                                  "number of at least {minimum}",
                                                  scheduler=scheduler, name=name, value=text,
                                                  minimum=minimum),
                          _("check the job's {name}", name=name))
    return int(text)


def _address(env: Mapping[str, str], name: str, scheduler: str) -> str:
    """An address variable; must be an IP literal (never resolved here) or a plain host name."""
    text = env.get(name, "").strip()
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}", text):
            return text
    raise ConfigError("bad-scheduler-env", _("{scheduler}: {name}={value!r} is not an address",
                                              scheduler=scheduler, name=name, value=text),
                      _("check the job's {name}", name=name))


# --- under the user's flags ----------------------------------------------------------------------


def merge_flags(layout: Layout, given: Mapping[str, object]) -> dict[str, object]:
    """The layout's fields with the user's explicitly given flags (``given``: field -> value) laid
    over them; a flag that contradicts the allocation is UsageError ``scheduler-conflict``."""
    merged = layout.fields()
    for name, value in given.items():
        if name in merged and name not in OVERRIDABLE and str(merged[name]) != str(value):
            flag = "--" + name.replace("_", "-")
            raise UsageError(
                "scheduler-conflict", _("{flag} {value} contradicts the {scheduler} allocation, "
                                        "which gives {given} ({source})", flag=flag, value=value,
                                        scheduler=layout.scheduler, given=merged[name],
                                        source=layout.sources.get(name, "?")),
                _("drop {flag} (ddpkit reads it from {scheduler}), or start the job outside the "
                  "allocation", flag=flag, scheduler=layout.scheduler))
        merged[name] = value
    return merged
