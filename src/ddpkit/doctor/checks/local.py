"""Local preflight rows from :class:`LocalFacts`: pure functions, one per check."""

from __future__ import annotations

from collections.abc import Mapping

from ddpkit.doctor.addresses import address_kind, describe_kind
from ddpkit.doctor.checks.facts import UNLIMITED, LocalFacts
from ddpkit.doctor.checks.model import CheckRow
from ddpkit.i18n import _

MIB = 1 << 20
GIB = 1 << 30
SHM_FAIL_BELOW = 256 * MIB  # Docker's default is 64 MB: NCCL's SHM transport fails with it
SHM_WARN_BELOW = 1 * GIB
NOFILE_WARN_BELOW = 4096
FEW_EPHEMERAL_PORTS = 5000
MEMLOCK_WARN_BELOW = 64 * MIB


def _size(n: int) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / MIB:.0f} MiB"


def hostname_row(facts: LocalFacts, env: Mapping[str, str], interface: str | None = None
                 ) -> CheckRow:
    title, name = _("hostname resolves to"), facts.hostname
    gloo = env.get("GLOO_SOCKET_IFNAME")
    if facts.hostname_error or not facts.hostname_addresses:
        return CheckRow("hostname", title, "warn",
                        _("{name} does not resolve ({why})", name=name,
                          why=facts.hostname_error or _("no address")),
                        _("map it in /etc/hosts to this node's private address (e.g. "
                          "`10.0.0.2 {name}`); torchrun's c10d rendezvous and Gloo use the "
                          "hostname", name=name))
    shown = ", ".join(facts.hostname_addresses)
    bad = [a for a in facts.hostname_addresses
           if address_kind(a) in ("loopback", "container-bridge", "link-local")]
    if not bad:
        return CheckRow("hostname", title, "pass", f"{name} -> {shown}")
    detail = _("{name} -> {shown}: {kind}", name=name, shown=shown, kind=describe_kind(bad[0]))
    if gloo:
        return CheckRow("hostname", title, "pass",
                        _("{detail} (harmless: GLOO_SOCKET_IFNAME={gloo} overrides it)",
                          detail=detail, gloo=gloo))
    return CheckRow(
        "hostname", title, "warn",
        _("{detail}; Gloo binds and advertises the address the hostname resolves to, which "
          "peers on other machines cannot reach", detail=detail),
        _("export GLOO_SOCKET_IFNAME={interface} (ddpkit launch sets it), or map {name} to the "
          "private address in /etc/hosts",
          interface=interface or _("<private NIC, see `ddpkit nics`>"), name=name))


def shm_row(facts: LocalFacts) -> CheckRow:
    shm, title = facts.shm, "/dev/shm"
    fix = _("export NCCL_SHM_DISABLE=1, fewer DataLoader workers, and ask the provider for a "
            "larger /dev/shm; if you start the container yourself: docker run --shm-size=16g "
            "(or --ipc host)")
    if not shm.exists:
        return CheckRow("shm", title, "warn", _("/dev/shm does not exist"), fix)
    if not shm.writable:
        return CheckRow("shm", title, "fail", _("/dev/shm is not writable by this user"), fix)
    detail = _("{total} ({free} free)", total=_size(shm.total), free=_size(shm.free))
    if shm.total < SHM_FAIL_BELOW:
        return CheckRow("shm", title, "fail",
                        _("{detail}: too small for NCCL's shared-memory transport (a container "
                          "default?)", detail=detail), fix)
    if shm.total < SHM_WARN_BELOW:
        return CheckRow("shm", title, "warn",
                        _("{detail}: tight for several GPUs and DataLoader workers",
                          detail=detail), fix)
    return CheckRow("shm", title, "pass", detail)


def nofile_row(facts: LocalFacts) -> CheckRow:
    soft, hard = facts.nofile
    title = _("open-file limit")
    shown = _("soft {soft}, hard {hard}", soft=_("unlimited") if soft == UNLIMITED else soft,
              hard=_("unlimited") if hard == UNLIMITED else hard)
    if soft != UNLIMITED and soft < NOFILE_WARN_BELOW:
        if hard == UNLIMITED or hard >= 65536:
            fix = _("ulimit -n 65536 (before launching)")
        else:
            fix = _("raise the hard limit: /etc/security/limits.conf `* - nofile 65536`, or "
                    "docker run --ulimit nofile=65536:65536")
        return CheckRow("open-files", title, "warn",
                        _("{shown}: NCCL sockets and DataLoader workers run out of descriptors",
                          shown=shown), fix)
    return CheckRow("open-files", title, "pass", shown)


def ephemeral_ports_row(facts: LocalFacts) -> CheckRow:
    title = _("ephemeral port range")
    if facts.port_range is None:
        return CheckRow("ephemeral-ports", title, "warn",
                        _("net.ipv4.ip_local_port_range is unreadable here"), "")
    low, high = facts.port_range
    count = high - low + 1
    detail = _("{low}-{high} ({count} ports); NCCL connects on these after bootstrap, so a "
               "firewall between the nodes must allow them", low=low, high=high, count=count)
    port = facts.master_port
    if low <= port <= high and str(port) not in facts.reserved_ports.split(","):
        return CheckRow("ephemeral-ports", title, "warn",
                        _("{detail}; the master port {port} lies inside it, so an outgoing "
                          "connection can take it", detail=detail, port=port),
                        _("use a master port below {low}, or reserve it: "
                          "sysctl -w net.ipv4.ip_local_reserved_ports={port}", low=low,
                          port=port))
    if count < FEW_EPHEMERAL_PORTS:
        return CheckRow("ephemeral-ports", title, "warn",
                        _("{detail}; few ports for many ranks", detail=detail),
                        "sysctl -w net.ipv4.ip_local_port_range='32768 60999'")
    return CheckRow("ephemeral-ports", title, "pass", detail)


def master_port_row(facts: LocalFacts) -> CheckRow:
    title, port = _("master port free"), facts.master_port
    if facts.master_port_free is None:
        return CheckRow("master-port", title, "pass", _("port {port} not checked", port=port))
    if facts.master_port_free:
        return CheckRow("master-port", title, "pass",
                        _("port {port} can be bound here", port=port))
    return CheckRow("master-port", title, "warn",
                    _("port {port} is already in use here (matters if this node is the master: "
                      "the rendezvous store would fail with EADDRINUSE)", port=port),
                    _("see who holds it: ss -ltnp 'sport = :{port}'; or use another "
                      "--master-port on every node", port=port))


def infiniband_row(facts: LocalFacts, env: Mapping[str, str]) -> CheckRow:
    title = _("InfiniBand devices")
    if not facts.ib_devices:
        return CheckRow("infiniband", title, "pass", _("none: NCCL will use TCP sockets "
                        "(`NET/IB : No device found` in its log is normal)"))
    listing = ", ".join(f"{d.name} [{'; '.join(d.port_states) or 'no ports'}]"
                        for d in facts.ib_devices)
    if env.get("NCCL_IB_DISABLE") == "1":
        return CheckRow("infiniband", title, "warn",
                        _("{listing}, but NCCL_IB_DISABLE=1 forces TCP sockets", listing=listing),
                        _("unset NCCL_IB_DISABLE to use InfiniBand"))
    if not any("ACTIVE" in s for d in facts.ib_devices for s in d.port_states):
        return CheckRow("infiniband", title, "warn",
                        _("{listing}: no port is ACTIVE", listing=listing),
                        _("check cabling and the subnet manager: ibstat / ibv_devinfo"))
    soft, _hard = facts.memlock
    if soft != UNLIMITED and soft < MEMLOCK_WARN_BELOW:
        return CheckRow("infiniband", title, "warn",
                        _("{listing}; locked-memory limit {limit} is too low to register "
                          "NCCL's buffers", listing=listing, limit=_size(soft)),
                        _("ulimit -l unlimited (docker: --ulimit memlock=-1)"))
    return CheckRow("infiniband", title, "pass", listing)


def gpus_row(facts: LocalFacts, env: Mapping[str, str]) -> CheckRow:
    title = _("GPUs (nvidia-smi -L)")
    if facts.gpus is None:
        return CheckRow("gpus", title, "warn", _("nvidia-smi not found: no NVIDIA driver on this "
                        "node (fine for a Gloo/CPU test, not for NCCL)"),
                        _("install the NVIDIA driver, or run on a GPU instance"))
    if facts.gpu_error or not facts.gpus:
        return CheckRow("gpus", title, "fail", facts.gpu_error or _("nvidia-smi lists no GPU"),
                        _("the driver is not working: reboot, or reinstall the NVIDIA driver"))
    names = sorted({g.split(":", 1)[1].split("(UUID")[0].strip() for g in facts.gpus if ":" in g})
    detail = f"{len(facts.gpus)} x {', '.join(names) or 'GPU'}"
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return CheckRow("gpus", title, "pass",
                        _("{detail}; CUDA_VISIBLE_DEVICES={visible} limits what ranks see",
                          detail=detail, visible=visible))
    return CheckRow("gpus", title, "pass", detail)


def torch_row(facts: LocalFacts) -> CheckRow:
    title = "torch"
    if facts.torch_version is None:
        return CheckRow("torch", title, "fail", _("torch is not installed in this Python"),
                        _("pip install torch (the same version on every node)"))
    if facts.torch_cuda is None:
        detail = _("{version} (CPU build: Gloo only, no NCCL)", version=facts.torch_version)
        if facts.gpus:
            return CheckRow("torch", title, "warn",
                            _("{detail} on a node with GPUs", detail=detail),
                            _("install a CUDA build of torch: see "
                              "https://pytorch.org/get-started"))
        return CheckRow("torch", title, "pass", detail)
    return CheckRow("torch", title, "pass",
                    _("{version} (CUDA {cuda}; same version needed on every node)",
                      version=facts.torch_version, cuda=facts.torch_cuda))


def local_rows(facts: LocalFacts, env: Mapping[str, str], interface: str | None = None
               ) -> tuple[CheckRow, ...]:
    """Every local check, in the order the table shows them (``interface``: the one to use, for
    concrete fixes)."""
    return (
        hostname_row(facts, env, interface),
        master_port_row(facts),
        shm_row(facts),
        nofile_row(facts),
        ephemeral_ports_row(facts),
        infiniband_row(facts, env),
        gpus_row(facts, env),
        torch_row(facts),
    )
