"""What ddpkit makes of each catalogued message template (used by catalogue_messages.py)."""

from __future__ import annotations

import re

from msgextract import HOLE

LEVEL_RANK = {"info": 0, "warning": 1, "error": 2}


def kind_of(mapping: str) -> str:
    if mapping == "benign":
        return "benign"
    if mapping == "unmapped":
        return "unmapped"
    if mapping == "unexplained-failure":
        return "generic"
    return "finding"


def matcher(template: str) -> str:
    """A regex (searched in a log line) for the template's longest line."""
    line = max(template.split("\n"), key=lambda s: len(s.replace(HOLE, "")))
    parts = line.split(HOLE)
    while parts and not parts[0].strip():
        parts.pop(0)
    while parts and not parts[-1].strip():
        parts.pop()
    return ".*?".join(re.escape(p) for p in parts)


# (where: a regex on the source file or None, what: a regex on the template, maps to, why).
# First match wins; case-insensitive. Ordered from the most specific cause to the generic.
Rule = tuple[str | None, str, str, str]
RULES: tuple[Rule, ...] = (
    (None, r"Duplicate GPU", "duplicate-gpu", "two ranks on one GPU"),
    (None, r"Bootstrap Root.*(?:mismatch|already checked in|out of range)|rank count|nranks <\*> vs"
     r"|Rank <\*> has appeared in both|duplicate (?:entries|ranks)",
     "rank-assignment", "ranks duplicated or world sizes disagree"),
    (None, r"Received <\*> death signal|got signal: <\*>|Closing process <\*> via signal"
     r"|Unable to shutdown process", "stopped-while-waiting",
     "the launcher was signalled: this node stopped while waiting, unless a failure came first"),
    (None, r"pass NULL|is invalid\b|invalid arguments?\b|wrong socket state|unexpected socket state"
     r"|should not be called|must be set|Logic error|already been destroyed|is not ready",
     "unexplained-failure", "an internal check of the library (no setup cause to name)"),
    (None, r"NCCL_COMM_ID|No valid (?:<IPv4_or_hostname>|\[IPv6\])|Net : (?:unsupported IP family"
     r"|string is null)|file creation for C10d store|File cannot be created",
     "rendezvous-config", "the rendezvous address or store settings (NCCL_COMM_ID, a file store)"),
    (None, r"Message truncated : received", "version-mismatch",
     "ranks exchanged bootstrap messages of different sizes: usually different NCCL versions"),
    (None, r"port: <\*> already in use", "port-in-use", "a port is taken"),
    (None, r"doesn't have \w+ built in", "version-mismatch", "a torch build without that backend"),
    (None, r"being ignored|Limiting value|cap it to|set both to|, setting to|setting NCCL"
     r"|using point-to-point network instead|Multi-GPU CC Off|ignoring address",
     "benign", "NCCL adjusted a setting and went on"),
    # Gloo's device.cc: "Unable to find interface for: ADDR" is raised when the address the device
    # took (from the hostname, when no interface name was given) is held by no interface here
    (r"gloo/transport/tcp/device", r"Unable to find interface for", "wrong-interface",
     "Gloo took this machine's address from its hostname, and no interface holds it"),
    (None, r"no (?:socket |usable listening )?interface|No interface found|Unable to find (?:address|"
     r"interface)|no device found (?:after excluding|matching)|IFNAME|interface for",
     "interface-not-found", "no usable network interface"),
    (None, r"Address already in use|EADDRINUSE|bind\(2\) for|\bbind\b.*fail",
     "port-in-use", "a port is taken"),
    (r"shm|shmutils", r".", "shm", "shared-memory transport"),
    (None, r"shared memory|/dev/shm|\bshm\b|named pipe", "shm", "shared memory"),
    (None, r"out of memory|Allocation failed|calloc|cudaMalloc|cuMemCreate|Failed to allocate"
     r"|\bmalloc\b|ENOMEM|Cannot allocate", "out-of-memory", "memory allocation failed"),
    (r"net_ib|ibv", r".", "ib-error", "InfiniBand/RoCE transport"),
    (None, r"(?-i:\bibv_|NET/IB|\bIB\b|\bRoCE\b|\bGID\b|verbs|mlx5|RDMA|\bGDR|GPU ?Direct"
     r"|dma-?buf|\bQP\b)", "ib-error", "InfiniBand/RoCE"),
    (r"transport/p2p", r".", "p2p", "CUDA peer-to-peer transport"),
    (None, r"cudaIpc|peer access|\bP2P\b|NVLink|NVLS|cuMem\w*|IPC handle|Rem Allocator",
     "p2p", "CUDA peer-to-peer"),
    (None, r"version|driver|ABI|plugin (?:v\d|returned)|ncclNet(?:_v\d)?\b.*(?:not|fail)",
     "version-mismatch", "builds or plugins that do not fit together"),
    (r"rendezvous|launcher|run\.py|launch\.py",
     r"timed? ?out|timeout|not enough|waiting for|non-joinable|closed",
     "rendezvous-timeout", "the rendezvous did not complete"),
    (r"distributed_c10d", r"MASTER_|init_method|rendezvous|env://|\bstore\b",
     "rendezvous-config", "init_process_group's settings"),
    (r"rendezvous|launcher|run\.py|launch\.py",
     r"endpoint|port|format|hostname|rdzv|rendezvous|backend|MASTER_|\bnnodes\b|nproc|run id"
     r"|--[a-z]", "rendezvous-config", "launcher or rendezvous settings"),
    (None, r"(?:Read|Write) timeout", "collective-timeout",
     "Gloo waited past its timeout for a peer's data: the peer is stuck or gone"),
    (None, r"Watchdog|Timeout at NCCL|collective operation timeout|Timed out waiting <\*> ?ms"
     r"|monitoredBarrier|heartbeat|desync|may be hanging|collective mismatch"
     r"|Work(?:NCCL)?\b.*tim", "collective-timeout",
     "a collective did not complete in time"),
    (r"TCPStore|FileStore|file_store|hash_store|etcd|store", r"timeout|timed out|Wait",
     "rendezvous-timeout", "a store wait (rendezvous/init) gave up"),
    (None, r"Connection closed|closed by (?:remote )?peer|reset by peer|Broken pipe|Socket closed"
     r"|unexpectedly closed|Read error|recv\b.*fail|Failed to recv|send\b.*fail|writev"
     r"|remote process exited|peer.*(?:exit|gone|closed)", "connection-lost",
     "a connection to a peer broke mid-run"),
    (None, r"connect|refused|No route|unreachable|getting address info|getaddrinfo|resolve"
     r"|Socket Timeout|timed out|timeout|exceeded (?:retries|error retry)|Accept failed"
     r"|socket creation|Failed to create a socket|AF_INET|address family", "peer-unreachable",
     "a peer could not be reached"),
    (None, r"Worker group|failed \(exitcode|exitcode|ChildFailedError|worker pids",
     "rank-failed", "a worker process failed"),
    (None, r"Tensor|tensor|dtype|\bdevice\b|sparse|dense|\bsize\b|shape|split|\bop\b"
     r"|argument|must (?:NOT )?be|expected|Expected|cannot be None|not part of|group|ranks?\b",
     "rank-failed", "the program called the library wrongly: the rank raises an exception"),
    (None, r"deprecated|is ignored|will be ignored|ignoring|Ignoring|falling back|using default"
     r"|generated a random|NOTE:|Setting OMP_NUM_THREADS|not supported in MacOs"
     r"|already exists and will be overwritten", "benign", "advisory: nothing failed"),
)
_COMPILED = tuple((re.compile(w, re.I) if w else None, re.compile(t, re.I), m, r)
                  for w, t, m, r in RULES)
MIN_MATCHER_LITERAL = 10  # characters of literal text a matcher needs to be recognised


def classify(source: str, file: str, template: str, level: str) -> tuple[str, str]:
    """(finding id | "benign" | "unexplained-failure" | "unmapped", why) for one template."""
    literal = max(len(p) for p in matcher(template).split(".*?")) if template else 0
    for where, what, maps, why in _COMPILED:
        if (where is None or where.search(file)) and what.search(template):
            failing = (r"retry|timeout|timed out|refused|closed|abort|exceed" if level == "info"
                       else r"fail|error|retry|timeout|timed out|refused|closed|abort|exceed")
            if (level != "error" and maps not in ("benign", "stopped-while-waiting")
                    and not re.search(failing, template, re.I)):
                # NCCL INFO "Failed to open libibverbs": a fallback, not a failure
                return "benign", f"{level} line (nothing failed) about: " + why
            return maps, why
    if level == "info":
        return "benign", "informational (NCCL INFO / LOG(INFO) / logger.info)"
    if level == "warning":
        return "benign", "a warning that does not stop the run"
    if literal < MIN_MATCHER_LITERAL:
        return "unmapped", "too little literal text to recognise in a log"
    return ("unexplained-failure",
            "an internal check or error with no setup cause: reported as a failure seen, "
            "with the next step")
