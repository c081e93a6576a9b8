"""What the local preflight checks look at, gathered in one place (the I/O edge).

Every probe is a parameter of :class:`Probes` so tests can replace it; ``root`` relocates
/proc, /sys and /dev for fixture trees. No network traffic: the hostname is resolved through the
system resolver (normally /etc/hosts) and the master-port check only binds locally.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import resource
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ddpkit import nvidia_smi
from ddpkit.net.ports import DEFAULT_MASTER_PORT

NVIDIA_SMI_TIMEOUT = 15.0
UNLIMITED = -1


@dataclass(frozen=True)
class ShmFacts:
    exists: bool
    total: int = 0  # bytes
    free: int = 0
    writable: bool = False


@dataclass(frozen=True)
class IbDevice:
    name: str
    port_states: tuple[str, ...]  # e.g. ("4: ACTIVE",)


@dataclass(frozen=True)
class LocalFacts:
    hostname: str
    hostname_addresses: tuple[str, ...] = ()
    hostname_error: str = ""
    shm: ShmFacts = field(default_factory=lambda: ShmFacts(exists=False))
    nofile: tuple[int, int] = (UNLIMITED, UNLIMITED)  # soft, hard; -1 = unlimited
    memlock: tuple[int, int] = (UNLIMITED, UNLIMITED)
    port_range: tuple[int, int] | None = None
    reserved_ports: str = ""
    ib_devices: tuple[IbDevice, ...] = ()
    gpus: tuple[str, ...] | None = None  # None: no nvidia-smi on PATH
    gpu_error: str = ""
    torch_version: str | None = None
    torch_cuda: str | None = None  # the CUDA version torch was built for; None: CPU build
    master_port: int = DEFAULT_MASTER_PORT
    master_port_free: bool | None = None  # None: not checked


def _resolve(name: str) -> tuple[str, ...]:
    infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    return tuple(dict.fromkeys(str(info[4][0]) for info in infos))


def _bind_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _nvidia_smi() -> tuple[tuple[str, ...] | None, str]:
    answer = nvidia_smi.ask(["-L"], NVIDIA_SMI_TIMEOUT)
    if not answer.found:
        return None, ""
    return tuple(line for line in answer.lines if line.startswith("GPU ")), answer.error


def _torch() -> tuple[str | None, str | None]:
    """torch's version and CUDA build, read from package metadata and torch/version.py (text)."""
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None, None
    spec = importlib.util.find_spec("torch")  # locates the package; does not import it
    cuda = None
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            try:
                text = (Path(location) / "version.py").read_text()
            except OSError:
                continue
            found = re.search(r"^cuda(?:\s*:\s*[^=]+)?\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
            cuda = found.group(1) if found else None
            break
    return version, cuda


@dataclass(frozen=True)
class Probes:
    hostname: Callable[[], str] = socket.gethostname
    resolve: Callable[[str], tuple[str, ...]] = _resolve
    bind_free: Callable[[int], bool] = _bind_free
    nvidia_smi: Callable[[], tuple[tuple[str, ...] | None, str]] = _nvidia_smi
    torch: Callable[[], tuple[str | None, str | None]] = _torch
    rlimit: Callable[[int], tuple[int, int]] = resource.getrlimit


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _shm(path: Path) -> ShmFacts:
    if not path.is_dir():
        return ShmFacts(exists=False)
    try:
        stats = os.statvfs(path)
    except OSError:
        return ShmFacts(exists=True)
    return ShmFacts(True, stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize,
                    os.access(path, os.W_OK))


def _ib(path: Path) -> tuple[IbDevice, ...]:
    try:
        names = sorted(p.name for p in path.iterdir())
    except OSError:
        return ()
    devices = []
    for name in names:
        ports = path / name / "ports"
        try:
            numbers = sorted(p.name for p in ports.iterdir())
        except OSError:
            numbers = []
        states = tuple(f"{n}: {(_read(ports / n / 'state') or '?').strip()}" for n in numbers)
        devices.append(IbDevice(name, states))
    return tuple(devices)


def _limits(value: tuple[int, int]) -> tuple[int, int]:
    soft, hard = value
    return (UNLIMITED if soft == resource.RLIM_INFINITY else int(soft),
            UNLIMITED if hard == resource.RLIM_INFINITY else int(hard))


def collect_local_facts(
    master_port: int = DEFAULT_MASTER_PORT, *, probes: Probes | None = None, root: Path = Path("/")
) -> LocalFacts:
    """Everything the local checks need, read now from this machine."""
    probes = probes or Probes()
    hostname = probes.hostname()
    addresses: tuple[str, ...] = ()
    error = ""
    try:
        addresses = probes.resolve(hostname)
    except OSError as exc:
        error = str(exc)
    port_text = _read(root / "proc/sys/net/ipv4/ip_local_port_range")
    port_range = None
    if port_text and len(port_text.split()) == 2:
        low, high = (int(x) for x in port_text.split())
        port_range = (low, high)
    reserved = (_read(root / "proc/sys/net/ipv4/ip_local_reserved_ports") or "").strip()
    gpus, gpu_error = probes.nvidia_smi()
    torch_version, torch_cuda = probes.torch()
    return LocalFacts(
        hostname=hostname,
        hostname_addresses=addresses,
        hostname_error=error,
        shm=_shm(root / "dev/shm"),
        nofile=_limits(probes.rlimit(resource.RLIMIT_NOFILE)),
        memlock=_limits(probes.rlimit(resource.RLIMIT_MEMLOCK)),
        port_range=port_range,
        reserved_ports=reserved,
        ib_devices=_ib(root / "sys/class/infiniband"),
        gpus=gpus,
        gpu_error=gpu_error,
        torch_version=torch_version,
        torch_cuda=torch_cuda,
        master_port=master_port,
        master_port_free=probes.bind_free(master_port),
    )
