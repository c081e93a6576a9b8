"""Gathering this node's facts for the planner (I/O: interfaces, name resolution, routes, files)."""

from __future__ import annotations

import importlib.util
import re
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

from ddpkit.errors import ConfigError, DdpkitError, NetworkProblem
from ddpkit.i18n import _
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.node.entry_check import config_entry_problem
from ddpkit.launch.node.plan import NodeFacts
from ddpkit.launch.torchrun.entry_file import read_entry
from ddpkit.launch.torchrun.local_rank import AUTO, EntrySource
from ddpkit.ncclconf.effective import effective_settings
from ddpkit.net.facts import tun_device_exists
from ddpkit.net.interfaces import discover
from ddpkit.net.isolation import check_reachable
from ddpkit.net.route import LOOPBACK_NAMES, resolve, route_to


def gather(config: LaunchConfig, env: Mapping[str, str], home: Path,
           etc_nccl_conf: Path = Path("/etc/nccl.conf"), cwd: Path | None = None) -> NodeFacts:
    nics = discover()
    if config.multi_node and not config.ifname and config.master_addr not in LOOPBACK_NAMES:
        check_reachable(nics, tun_device_exists())  # no-private-network: say so now, not after a timeout
    try:
        addresses = resolve(config.master_addr)
    except DdpkitError as exc:
        raise ConfigError(
            "master-unresolvable",
            _("--master-addr {master} does not resolve to an address ({why})",
              master=config.master_addr, why=exc.message),
            _("pass the master's private IP address (run `ddpkit nics` on the master) instead of "
              "a name"),
        ) from exc
    route = None
    if config.multi_node and not config.is_master and config.master_addr not in LOOPBACK_NAMES:
        try:
            route = route_to(config.master_addr, nics)
        except DdpkitError as exc:
            raise NetworkProblem(
                "master-unreachable",
                _("this machine has no route to the master {master}: {why}",
                  master=config.master_addr, why=exc.message),
                _("check that both machines are on the same private network (`ddpkit nics` on "
                  "each) and that --master-addr is the master's private address"),
            ) from exc
    file_settings = {
        s.name: (s.value, s.path or "")
        for s in effective_settings(env, home, etc_nccl_conf)
        if s.source == "file"
    }
    return NodeFacts(
        hostname=socket.gethostname(),
        nics=nics,
        master_addresses=addresses,
        route=route,
        nccl_file_settings=file_settings,
        entry_source=entry_source(config, env, cwd or Path.cwd()),
        torch_version=_torch_version(),
        entry_problem=config_entry_problem(config, env, cwd or Path.cwd(), sys.path),
    )


_VERSION_LINE = re.compile(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", re.M)


def _torch_version() -> str | None:
    """The installed torch's version, read from its ``torch/version.py`` (``__version__ =
    '2.13.0+cpu'``, the line every torch release writes): importing torch takes seconds, and
    ``importlib.metadata`` costs 15-30 ms of imports on a launch's critical path (before torchrun
    starts). The same text as ``torch.__version__``, local build tag included (``+cu130``, which
    the metadata of PyPI's CUDA wheels lacks); a unit test compares them."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        try:
            text = (Path(folder) / "version.py").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found = _VERSION_LINE.search(text)
        if found:
            return found[1]
    return None


def entry_source(config: LaunchConfig, env: Mapping[str, str], cwd: Path) -> EntrySource | None:
    """The entry point's source, read only when the local-rank argument is decided from it."""
    if config.local_rank_arg != AUTO or config.use_env:
        return None
    return read_entry(config.entry, cwd=cwd, is_module=config.is_module,
                      no_python=config.has_torchrun_option("--no-python"), env=env,
                      sys_path=sys.path)
