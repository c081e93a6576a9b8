"""The kinds of event the scan makes of a log line: an enum, whose values are the strings
events carry (over the wire too), so a kind is compared by its member, never by a string typed
anew (tests/unit/test_doctor_kinds.py checks every set of kinds the rules route by)."""

from __future__ import annotations

import enum


class EventKind(str, enum.Enum):
    """One kind of event (the value is what ``Event.kind`` holds)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    AGENT_FAILED = "agent-failed"
    BARRIER_FAILED = "barrier-failed"
    BENIGN = "benign"
    BOOTSTRAP_RETCODE = "bootstrap-retcode"
    CATALOGUED_WARNING = "catalogued-warning"  # the quiet tail's: a warning-level template
    CHILD_FAILED = "child-failed"
    CONNECT_ERROR = "connect-error"
    CONNECTION_LOST = "connection-lost"
    DEATH_SIGNAL = "death-signal"
    DEVICE_ORDINAL = "device-ordinal"
    DUPLICATE_GPU = "duplicate-gpu"
    EXCEPTION = "exception"
    FAILURE_LINE = "failure-line"
    FATAL_SIGNAL = "fatal-signal"
    GLOO_LOOPBACK_FALLBACK = "gloo-loopback-fallback"
    GLOO_MESH_FAILED = "gloo-mesh-failed"
    GLOO_TIMEOUT = "gloo-timeout"
    GPU_TOPOLOGY = "gpu-topology"
    IB_ERROR = "ib-error"
    JOB_FACT = "job-fact"
    KILLED = "killed"
    LOCAL_RANK_ARG = "local-rank-arg"
    LOCAL_RANK_MINUS_ONE = "local-rank-minus-one"
    LOG_READ = "log-read"
    MPI_RANK_SIGNALED = "mpi-rank-signaled"  # Open MPI's launcher: a rank a signal ended
    NCCL_BOOTSTRAP = "nccl-bootstrap"
    NCCL_COMM = "nccl-comm"
    NCCL_ENV = "nccl-env"
    NCCL_ERROR = "nccl-error"
    NCCL_LOCAL_LINK = "nccl-local-link"
    NCCL_NETWORK = "nccl-network"
    NCCL_OOB = "nccl-oob"
    NCCL_PLUGIN = "nccl-plugin"
    NCCL_SOCKET_IFACES = "nccl-socket-ifaces"
    NCCL_SOCKET_ITEM = "nccl-socket-item"
    NCCL_TREES = "nccl-trees"
    NCCL_VERSION = "nccl-version"
    NCCL_WARN = "nccl-warn"
    NCCLTESTS_RANK = "nccltests-rank"
    NO_INTERFACE = "no-interface"
    OOM = "oom"
    P2P_ERROR = "p2p-error"
    PORT_IN_USE = "port-in-use"
    RDZV_CONFIG = "rdzv-config"
    RDZV_CONNECTION = "rdzv-connection"
    RDZV_TIMEOUT = "rdzv-timeout"
    RESOLVE_FAILED = "resolve-failed"
    ROOT_MISMATCH = "root-mismatch"
    RUN_COMPLETE = "run-complete"
    RUN_STAGE = "run-stage"
    SHM_ERROR = "shm-error"
    # made at the file edge (diagnose.py), not by the scan: a rank's stderr.log in a start of
    # torchrun's --log-dir that is empty while another rank's of that start is not
    SILENT_RANK_LOG = "silent-rank-log"
    STACK_FRAME = "stack-frame"  # a frame of py-spy's text dump (causes/pyspy_dump.py)
    STACK_THREAD = "stack-thread"  # its line for a thread
    SUMMARY_EXIT = "summary-exit"
    SUMMARY_FAILURES = "summary-failures"
    SUMMARY_HOST = "summary-host"
    SUMMARY_RANK = "summary-rank"
    SUMMARY_ROOT = "summary-root"
    SUMMARY_SIGNAL = "summary-signal"
    TORCH_VERSION = "torch-version"
    VERSION_ERROR = "version-error"
    # the quiet tail's: a warning in Python's or c10's own format whose text the catalogue does
    # not hold (its format says it is a warning, not a failure)
    WARNING_LINE = "warning-line"
    WATCHDOG = "watchdog"
    WATCHDOG_FRAME = "watchdog-frame"
    WORK_PROGRESS = "work-progress"
