"""The NCCL variable names ddpkit knows, with NCCL's documented default where there is one.

Source: the "Environment Variables" page of the NCCL user guide (2.29) and NCCL's ``param.cc`` /
``socket.cc``. Defaults that depend on the platform or the NCCL version are given as ``None`` with
a note, never as a guess. ``important`` marks the variables ``nccl-conf show`` lists even when
nothing sets them, because they decide whether a multi-node job can connect at all.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from ddpkit.i18n import _


@dataclass(frozen=True)
class KnownVariable:
    name: str
    summary: str
    default: str | None = None  # NCCL's documented default, as NCCL would print it
    default_note: str = ""  # what "unset" means when there is no single default value
    important: bool = False
    choices: tuple[str, ...] = ()  # the only values NCCL acts on (others are ignored or fail)
    choices_ignore_case: bool = False
    read_by_pytorch: bool = False  # read by torch.distributed with getenv, not by NCCL


_AUTO_IFNAME = _("automatic: ib*, else not docker/lo/virbr, else docker, else lo; first one "
                 "bootstraps")

_K = KnownVariable  # short name for the table below

KNOWN: tuple[KnownVariable, ...] = (
    # Sockets and interface selection: what multi-node jobs on rented instances trip over.
    _K("NCCL_SOCKET_IFNAME", "IP interfaces NCCL may use (prefix list; ^ excludes, = exact)",
        default_note=_AUTO_IFNAME, important=True),
    _K("NCCL_SOCKET_FAMILY", "force IPv4 (AF_INET) or IPv6 (AF_INET6) interfaces",
        default_note=_("either family: the first interface found decides"), important=True,
        choices=("AF_INET", "AF_INET6")),
    _K("NCCL_SOCKET_NTHREADS", "helper threads per socket connection (1..16)", "1",
        default_note=_("1 on generic NICs (2 on AWS, 4 on GCP gVNIC)"), important=True),
    _K("NCCL_NSOCKS_PERTHREAD", "sockets per helper thread (threads x sockets <= 64)", "1",
        default_note=_("1 on generic NICs (8 on AWS)"), important=True),
    _K("NCCL_SOCKET_RETRY_CNT", "connect retries after refused/unreachable/timeout", "34"),
    _K("NCCL_SOCKET_RETRY_SLEEP_MSEC", "first connect retry delay, grows linearly", "100"),
    _K("NCCL_SOCKET_POLL_TIMEOUT_MSEC", "poll timeout between bootstrap socket attempts", "0"),
    _K("NCCL_COMM_ID", "address:port of the bootstrap root, instead of a unique id"),
    _K("NCCL_CONF_FILE", "the configuration file read instead of ~/.nccl.conf (NCCL >= 2.23)"),
    _K("NCCL_IB_DISABLE", "1 disables InfiniBand/RoCE and forces the socket transport", "0",
        important=True),
    _K("NCCL_NET", "force a network module by name (IB, Socket, or a plugin's name)"),
    _K("NCCL_NET_PLUGIN", "net plugin library name or suffix, or none"),
    _K("NCCL_TUNER_PLUGIN", "tuner plugin library name or suffix, or none"),
    _K("NCCL_PROFILER_PLUGIN", "profiler plugin library name or suffix, or none"),
    _K("NCCL_ENV_PLUGIN", "environment plugin library name or suffix, or none"),
    _K("NCCL_OOB_NET_ENABLE", "use the NCCL net for out-of-band (bootstrap) traffic"),
    _K("NCCL_OOB_NET_IFNAME", "interfaces for out-of-band traffic when NCCL_OOB_NET_ENABLE=1"),
    _K("NCCL_UID_STAGGER_THRESHOLD", "ranks per unique id above which connects are staggered",
        "256"),
    _K("NCCL_UID_STAGGER_RATE", "target messages/s when staggering unique-id connects", "7000"),
    _K("NCCL_CROSS_NIC", "let rings/trees use different NICs on different nodes", "2"),
    _K("NCCL_IGNORE_CPU_AFFINITY", "ignore the job's CPU affinity, use the GPU's", "0"),
    # InfiniBand / RoCE.
    _K("NCCL_IB_HCA", "RDMA devices to use (prefix list; ^ excludes, = exact, :port)"),
    _K("NCCL_IB_TIMEOUT", "InfiniBand verbs timeout exponent", "20",
        default_note=_("20 since NCCL 2.23 (18 since 2.14, 14 before)")),
    _K("NCCL_IB_RETRY_CNT", "InfiniBand retry count", "7"),
    _K("NCCL_IB_GID_INDEX", "RoCE global id index", "-1"),
    _K("NCCL_IB_ADDR_FAMILY", "address family of the dynamically chosen GID", "AF_INET"),
    _K("NCCL_IB_ADDR_RANGE", "valid GID range (CIDR) for the dynamically chosen GID"),
    _K("NCCL_IB_ROCE_VERSION_NUM", "RoCE version of the dynamically chosen GID", "2"),
    _K("NCCL_IB_SL", "InfiniBand service level", "0"),
    _K("NCCL_IB_TC", "InfiniBand traffic class", "0"),
    _K("NCCL_IB_FIFO_TC", "traffic class of control messages (defaults to NCCL_IB_TC)"),
    _K("NCCL_IB_RETURN_ASYNC_EVENTS", "stop IB traffic on fatal asynchronous events", "1"),
    _K("NCCL_IB_AR_THRESHOLD", "size above which data goes in a separate adaptive-routing message",
        "8192"),
    _K("NCCL_IB_QPS_PER_CONNECTION", "queue pairs per connection", "1"),
    _K("NCCL_IB_SPLIT_DATA_ON_QPS", "split each message over the queue pairs", "0"),
    _K("NCCL_IB_CUDA_SUPPORT", "force or disable GPU Direct RDMA (removed in 2.4)"),
    _K("NCCL_IB_PCI_RELAXED_ORDERING", "PCI relaxed ordering for IB verbs", "2"),
    _K("NCCL_IB_ADAPTIVE_ROUTING", "adaptive routing (default on for IB, off for RoCE)"),
    _K("NCCL_IB_ECE_ENABLE", "enhanced connection establishment", "1"),
    _K("NCCL_IB_MERGE_NICS", "merge dual-port NICs into one device", "1"),
    _K("NCCL_IB_GDR_LEVEL", "old name of NCCL_NET_GDR_LEVEL"),
    _K("NCCL_NET_GDR_LEVEL", "maximum NIC-GPU distance for GPU Direct RDMA"),
    _K("NCCL_NET_GDR_C2C", "GPU Direct RDMA through C2C-attached CPUs"),
    _K("NCCL_NET_GDR_READ", "GPU Direct RDMA when sending"),
    _K("NCCL_NET_SHARED_BUFFERS", "one shared buffer pool for remote peers", "1"),
    _K("NCCL_NET_SHARED_COMMS", "reuse connections for PXN", "1"),
    _K("NCCL_DMABUF_ENABLE", "dma-buf GPU Direct RDMA registration", "1"),
    # Intra-node transports and tuning.
    _K("NCCL_P2P_DISABLE", "1 disables GPU-to-GPU peer transport (NVLink/PCI)", "0",
        important=True),
    _K("NCCL_SHM_DISABLE", "1 disables the shared-memory transport", "0", important=True),
    _K("NCCL_P2P_LEVEL", "maximum GPU distance for the P2P transport (LOC..SYS)"),
    _K("NCCL_P2P_DIRECT_DISABLE", "forbid direct user-buffer access between GPUs of a process"),
    _K("NCCL_P2P_NET_CHUNKSIZE", "send/recv message size over the network", "131072"),
    _K("NCCL_P2P_LL_THRESHOLD", "largest P2P message sent with the LL protocol", "16384"),
    _K("NCCL_P2P_PXN_LEVEL", "when PXN is used for send/recv", "2"),
    _K("NCCL_ALLOC_P2P_NET_LL_BUFFERS", "dedicated LL buffers for every P2P network connection",
        "0"),
    _K("NCCL_PXN_DISABLE", "disable inter-node traffic through a non-local NIC", "0"),
    _K("NCCL_PXN_C2C", "PXN through C2C + PCIe"),
    _K("NCCL_NVB_DISABLE", "disable NVLink through an intermediate GPU", "0"),
    _K("NCCL_BUFFSIZE", "buffer size per peer pair, bytes", "4194304"),
    _K("NCCL_NTHREADS", "CUDA threads per block (64, 128, 256, 512)"),
    _K("NCCL_MAX_NCHANNELS", "upper limit on channels"),
    _K("NCCL_MIN_NCHANNELS", "lower limit on channels"),
    _K("NCCL_MAX_NRINGS", "old name of NCCL_MAX_NCHANNELS"),
    _K("NCCL_MIN_NRINGS", "old name of NCCL_MIN_NCHANNELS"),
    _K("NCCL_MAX_CTAS", "upper limit on CTAs"),
    _K("NCCL_MIN_CTAS", "lower limit on CTAs"),
    _K("NCCL_CGA_CLUSTER_SIZE", "CUDA thread block cluster size (0..8)"),
    _K("NCCL_CTA_POLICY", "communicator CTA policy"),
    _K("NCCL_NETDEVS_POLICY", "how network devices are assigned to GPUs", "AUTO"),
    _K("NCCL_ALGO", "allowed algorithms (Ring, Tree, CollnetDirect, NVLS, PAT...)"),
    _K("NCCL_PROTO", "allowed protocols (LL, LL128, Simple)"),
    _K("NCCL_SINGLE_RING_THRESHOLD", "removed in NCCL 2.3"),
    _K("NCCL_LL_THRESHOLD", "removed in NCCL 2.5"),
    _K("NCCL_TREE_THRESHOLD", "removed in NCCL 2.5"),
    _K("NCCL_LAUNCH_MODE", "kernel launch mode (PARALLEL or GROUP)", "PARALLEL"),
    _K("NCCL_LAUNCH_ORDER_IMPLICIT", "order operations of several communicators by host order",
        "0"),
    _K("NCCL_LAUNCH_RACE_FATAL", "fail when host threads race to launch on one device", "1"),
    _K("NCCL_CHECKS_DISABLE", "disable argument checks (deprecated)"),
    _K("NCCL_CHECK_POINTERS", "check CUDA pointers on every call", "0"),
    _K("NCCL_COMM_BLOCKING", "1 blocking, 0 nonblocking communicators"),
    _K("NCCL_RUNTIME_CONNECT", "connect peers lazily at the first operation", "1"),
    _K("NCCL_GRAPH_REGISTER", "user buffer registration under CUDA graphs", "1"),
    _K("NCCL_GRAPH_MIXING_SUPPORT", "graph-captured and plain calls outstanding together", "1"),
    _K("NCCL_LOCAL_REGISTER", "user buffer registration via ncclCommRegister", "1"),
    _K("NCCL_LEGACY_CUDA_REGISTER", "registration of cudaMalloc buffers", "0"),
    _K("NCCL_WIN_ENABLE", "window memory registration", "1"),
    _K("NCCL_SET_STACK_SIZE", "set the CUDA stack size to NCCL's largest kernel's", "0"),
    _K("NCCL_CUMEM_ENABLE", "cuMem* device allocations (auto-detected since 2.19)"),
    _K("NCCL_CUMEM_HOST_ENABLE", "cuMem* host allocations"),
    _K("NCCL_MEM_SYNC_DOMAIN", "memory sync domain of NCCL kernels", "1"),
    _K("NCCL_NVLS_ENABLE", "NVLink SHARP", "2"),
    _K("NCCL_MNNVL_ENABLE", "multi-node NVLink"),
    _K("NCCL_MNNVL_UUID", "override the multi-node NVLink UUID"),
    _K("NCCL_MNNVL_CLIQUE_ID", "override the multi-node NVLink clique id"),
    _K("NCCL_COLLNET_ENABLE", "use the CollNet plugin", "0"),
    _K("NCCL_COLLNET_NODE_THRESHOLD", "nodes below which CollNet stays off", "2"),
    _K("NCCL_TOPO_FILE", "XML topology to load before detection"),
    _K("NCCL_TOPO_DUMP_FILE", "where to dump the detected XML topology"),
    _K("NCCL_IPC_USE_ABSTRACT_SOCKET", "abstract Unix sockets for CUDA IPC handles", "1"),
    _K("NCCL_RAS_ENABLE", "the RAS subsystem", "1"),
    _K("NCCL_RAS_ADDR", "address:port the RAS subsystem listens on", "localhost:28028"),
    _K("NCCL_RAS_TIMEOUT_FACTOR", "multiplier on the RAS timeouts", "1"),
    # Debug output.
    _K("NCCL_DEBUG", "debug output level", default_note=_("unset: no debug output"),
        important=True, choices=("VERSION", "WARN", "INFO", "ABORT", "TRACE"),
        choices_ignore_case=True),
    _K("NCCL_DEBUG_SUBSYS", "subsystems NCCL_DEBUG=INFO prints", "INIT,BOOTSTRAP,ENV",
        important=True),
    _K("NCCL_DEBUG_FILE", "send debug output to a file (%h host, %p pid)",
        default_note=_("unset: standard output")),
    _K("NCCL_DEBUG_TIMESTAMP_FORMAT", "strftime format of debug timestamps", "[%F %T] "),
    _K("NCCL_DEBUG_TIMESTAMP_LEVELS", "which debug levels get a timestamp", "WARN"),
    _K("NCCL_SET_THREAD_NAME", "name NCCL's CPU threads", "0"),
    # Read by PyTorch (torch.distributed), not by NCCL: a file entry arrives too late for them.
    _K("NCCL_ASYNC_ERROR_HANDLING", "old name of TORCH_NCCL_ASYNC_ERROR_HANDLING (PyTorch)",
        read_by_pytorch=True),
    _K("NCCL_BLOCKING_WAIT", "old name of TORCH_NCCL_BLOCKING_WAIT (PyTorch)",
        read_by_pytorch=True),
    _K("NCCL_DESYNC_DEBUG", "old name of TORCH_NCCL_DESYNC_DEBUG (PyTorch)",
        read_by_pytorch=True),
)

_BY_NAME: dict[str, KnownVariable] = {v.name: v for v in KNOWN}


def known_variable(name: str) -> KnownVariable | None:
    return _BY_NAME.get(name)


def is_known(name: str) -> bool:
    return name in _BY_NAME


def known_names() -> tuple[str, ...]:
    return tuple(sorted(_BY_NAME))


def important_variables() -> tuple[KnownVariable, ...]:
    return tuple(sorted((v for v in KNOWN if v.important), key=lambda v: v.name))


def closest_names(name: str, limit: int = 3) -> tuple[str, ...]:
    """Known names that look like ``name`` (a typo's likely intent), best first."""
    return tuple(difflib.get_close_matches(name.upper(), known_names(), n=limit, cutoff=0.75))


def value_is_accepted(variable: KnownVariable, value: str) -> bool:
    """False when ``variable`` has a fixed set of values and ``value`` is not one of them."""
    if not variable.choices:
        return True
    if variable.choices_ignore_case:
        return value.upper() in variable.choices
    return value in variable.choices
