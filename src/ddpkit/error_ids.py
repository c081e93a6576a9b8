"""Every error id ddpkit raises, in one registry: one mistake has one id, and one id one kind
(so one exit code). ``tests/unit/test_error_ids.py`` checks the source against it both ways: every
id raised is here with the class it is raised with, and every id here is raised somewhere.
Code that must act on an id it received (a remote node's JSON) compares with the named constants
below, never with a string literal."""

from __future__ import annotations

from ddpkit.errors import (
    ConfigError,
    DdpkitError,
    DeadlineExceeded,
    EnvironmentProblem,
    JobFailed,
    NetworkProblem,
    UsageError,
)

JOB_FAILED = "job-failed"
JOB_STOPPED = "job-stopped"
JOB_TIMEOUT = "job-timeout"
JOB_HUNG = "job-hung"
JOIN_STORE_LOST = "join-store-lost"
RENDEZVOUS_TIMEOUT = "rendezvous-timeout"  # (also doctor's finding of the same failure)

_BY_KIND: dict[type[DdpkitError], tuple[str, ...]] = {
    UsageError: (
        "scheduler-conflict", "slurm-tasks-per-node", "bad-hang-action",
        "bad-algorithm", "bad-assignment", "bad-bench-option", "bad-count", "bad-duration",
        "bad-env", "bad-nnodes", "bad-nodes", "bad-nproc-per-node", "bad-overlap", "bad-port",
        "bad-rate", "bad-rdzv-endpoint", "bad-setting", "bad-size", "bad-ssh-option",
        "bad-threshold", "bad-timeout", "bad-usage", "duplicate-key", "entry-flags-conflict",
        "local-addr-per-node", "local-rank-arg-conflict", "missing-inter-node",
        "missing-master-addr", "missing-model-size", "missing-script", "missing-to",
        "nnodes-mismatch", "no-token", "node-rank-out-of-range", "nothing-to-measure",
        "nothing-to-set", "rdzv-backend-conflict", "rdzv-endpoint-conflict", "sim-no-such-node",
        "standalone-multi-node", "unknown-command", "unknown-id", "virtual-local-rank-conflict",
        "unknown-gpu", "bad-memory-input", "bad-strategy", "unknown-model", "c10d-node-rank",
    ),
    ConfigError: (
        "bad-hostlist", "bad-scheduler-env", "job-not-running", "no-rank-list", "bad-rank-list",
        "bad-address", "bad-comm-hook", "bad-env-file", "bad-env-wire", "bad-host",
        "bad-hostfile", "bad-hosts", "bad-interface-name", "bad-job", "bad-remote-program",
        "bad-token", "bad-variable-name", "bench-field", "bench-not-json", "bench-schema",
        "bench-unreadable", "comm-hook-already-set", "conf-dir-missing", "conf-file-in-file",
        "doctor-version-mismatch", "duplicate-node-rank", "empty-hostfile", "env-file-not-found",
        "env-file-unreadable", "host-unresolvable", "hostfile-not-found", "hostfile-unreadable",
        "ifname-ignored", "interface-has-no-address", "interface-not-found", "invalid-value",
        "log-unreadable", "master-address-shared", "master-not-local", "master-unresolvable",
        "no-usable-interface", "nodes-disagree", "not-a-ddp-model", "not-a-file",
        "not-an-nccl-variable", "powersgd-gloo-buckets", "script-not-found", "sim-bad-delay",
        "sim-bad-ifname-style", "sim-bad-loss", "sim-bad-name", "sim-bad-node-count",
        "sim-bad-rate", "sim-bad-subnet", "sim-damaged", "sim-exists-different", "sim-half-built",
        "sim-leftovers", "sim-not-up", "sim-state-unreadable", "sim-subnet-in-use",
        "sim-subnet-too-small", "sim-no-private-network-conflict", "token-file-unreadable",
        "too-many-hosts", "unknown-comm-hook",
        "unknown-nccl-variable",
    ),
    EnvironmentProblem: (
        "disk-full", "matplotlib-missing", "missing-package", "missing-tool", "needs-root",
        "netem-unavailable", "nothing-to-plot", "output-unwritable", "permission-denied",
        "run-dir-in-use", "run-dir-unwritable", "sim-down-incomplete", "sim-host-query-failed",
        "sim-step-failed",
        "token-file-failed", "version-mismatch", "write-failed",
    ),
    NetworkProblem: (
        "join-master-unreachable", "join-store-failed", "master-address-unknown",
        "master-unreachable", "no-private-network", "no-route", "port-in-use",
        "remote-route-failed",
        "rendezvous-timeout", "store-failed", "store-lost", "join-store-lost",
    ),
    JobFailed: (
        "job-failed", "job-full", "job-not-found", "job-stopped", "rank-taken", "token-rejected",
        "job-store-tampered",
    ),
    DeadlineExceeded: (
        "job-hung", "job-timeout", "join-timeout", "nodes-missing", "sim-busy", "sim-links-down",
    ),
    DdpkitError: (
        "internal-error",
    ),
}

ERROR_IDS: dict[str, type[DdpkitError]] = {
    error_id: kind for kind, error_ids in _BY_KIND.items() for error_id in error_ids}
