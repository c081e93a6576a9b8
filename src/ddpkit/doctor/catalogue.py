"""The finding catalogue: every id ``ddpkit doctor`` can report, in plain words, with its fix.

``docs/findings.md`` is generated from this table (``render_markdown``) and a test keeps the two
identical. ``priority`` orders findings of the same severity: the most likely root cause first.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpkit.doctor.findings import Severity
from ddpkit.doctor.real_examples import REAL_EXAMPLES, thread_url


@dataclass(frozen=True)
class Entry:
    id: str
    severity: Severity
    title: str
    explanation: str  # what it means, in plain words (specifics are prepended by the rules)
    fix: str  # the generic fix; rules replace it with a concrete one when they know more
    recognised: str  # how the log reveals it (for the docs)
    priority: int  # higher = more likely the root cause when several findings hold


_ENTRIES = (
    Entry(
        "wrong-interface", "error",
        "Ranks advertise an address their peers cannot reach",
        "NCCL's bootstrap (or Gloo, or the c10d store) picked a network interface whose address "
        "the other machines cannot connect to: loopback, a container/NAT bridge such as Docker's "
        "172.17.0.0/16 (often the very same address on every rented instance), a link-local "
        "address, a tunnel, or a hostname that resolves to 127.0.x. Rank 0's address travels to "
        "every rank, so every peer dials it and is refused or times out.",
        "Use the private NIC on every node, in NCCL's exact-match form:\n"
        "  export NCCL_SOCKET_IFNAME==eth1 GLOO_SOCKET_IFNAME=eth1\n"
        "or persist it: ddpkit nccl-conf set NCCL_SOCKET_IFNAME==eth1\n"
        "Not sure which NIC? ddpkit nics --to <master-addr>",
        "`Bootstrap : Using <if>:<addr>` / `NET/Socket : Using ...` on an unreachable address "
        "class, together with `Connection refused`/timeouts; certain when another node was "
        "refused by (or timed out on) the very address rank 0 bootstrapped on, or when two nodes "
        "bootstrap on the same address. Gloo/c10d errors naming a loopback or docker-bridge "
        "`remote=` address count too, as do Gloo's `Unable to resolve hostname ... Using the "
        "loopback address as fallback` followed by refused connects, and (a warning) a "
        "`NET/Socket : Using` list that mixes a routable interface with bridges, veths or "
        "link-local addresses, also when posted one interface per line.",
        100,
    ),
    Entry(
        "interface-not-found", "error",
        "The requested socket interface does not exist here",
        "NCCL_SOCKET_IFNAME or GLOO_SOCKET_IFNAME names an interface that does not exist on this "
        "node (or matches nothing usable), so the rank cannot open its bootstrap socket. NCCL "
        "treats the value as a list of prefixes unless it starts with '='; Gloo wants exact names.",
        "List this node's interfaces and their addresses: ddpkit nics\n"
        "then set a name that exists on this node (names may differ per node), e.g.\n"
        "  export NCCL_SOCKET_IFNAME==eth1 GLOO_SOCKET_IFNAME=eth1",
        "`NCCL WARN Bootstrap : no socket interface found`, `NET/Socket : no interface found`, "
        "Gloo's `Unable to find address for: <name>`.",
        98,
    ),
    Entry(
        "container-network", "error",
        "The nodes run in containers on isolated bridge networks",
        "Every address the ranks could use is a container bridge address (such as Docker's "
        "172.17.0.0/16). Such networks exist only inside one host: containers on different "
        "machines cannot reach each other through them, whatever interface is chosen.",
        "Run the containers on the host's network (and IPC namespace):\n"
        "  docker run --network host --ipc host ...\n"
        "or give them a routable network (macvlan/SR-IOV), then check with:\n"
        "  ddpkit doctor --nnodes <N> --node-rank <R> --master-addr <addr>",
        "All interfaces in `NET/Socket : Using ...` lines are container-bridge addresses and "
        "connections between nodes fail.",
        97,
    ),
    Entry(
        "port-in-use", "error",
        "The master/rendezvous port is already taken",
        "The rendezvous store (TCPStore) could not listen on its port because another process "
        "already holds it: often a second job on the default port 29500, or a previous run that "
        "has not exited yet.",
        "Pick a free port on the master and pass the same one on every node: --master-port 29501\n"
        "See who holds the port: ss -ltnp 'sport = :29500'",
        "`Address already in use`, `EADDRINUSE`, `errno: 98` from the c10d store or torchrun.",
        95,
    ),
    Entry(
        "duplicate-gpu", "error",
        "Two ranks on one node use the same GPU",
        "NCCL found two ranks bound to the same CUDA device. Usually the training script never "
        "calls torch.cuda.set_device(local_rank), or --nproc-per-node exceeds the GPUs visible "
        "(CUDA_VISIBLE_DEVICES).",
        "Bind each rank to its own GPU before init_process_group:\n"
        "  torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n"
        "and keep --nproc-per-node at most the number of GPUs in `nvidia-smi -L`.",
        "`NCCL WARN Duplicate GPU detected : rank X and rank Y both on CUDA device Z` (also "
        "posted bare, without the NCCL WARN prefix).",
        94,
    ),
    Entry(
        "shm", "error",
        "Shared memory (/dev/shm) is too small or not writable",
        "NCCL (and DataLoader workers) put buffers in /dev/shm. Containers default to a 64 MB "
        "/dev/shm, which is too small for NCCL's intra-node transport.",
        "Give the container more shared memory: docker run --shm-size=16g (or --ipc host)\n"
        "or on a host: mount -o remount,size=16G /dev/shm\n"
        "Workaround (slower): export NCCL_SHM_DISABLE=1",
        "`misc/shmutils.cc ... Error while creating shared memory segment`, `failed to extend "
        "/dev/shm/...`, DataLoader's `insufficient shared memory (shm)`, `No space left on device` "
        "for /dev/shm or torch_ files.",
        93,
    ),
    Entry(
        "version-mismatch", "error",
        "Nodes run different NCCL/CUDA versions",
        "The ranks do not all run the same NCCL (or the CUDA runtime needs a newer driver than "
        "the node has). NCCL requires the same version on every rank; mixed versions fail or "
        "hang during init.",
        "Install the same torch build on every node (it bundles NCCL), e.g. pip install "
        "torch==<same version>\n"
        "Compare nodes: python -c 'import torch; print(torch.__version__, "
        "torch.cuda.nccl.version())'\n"
        "or let ddpkit diff them: ddpkit doctor --nnodes <N> --node-rank <R> --master-addr <addr>",
        "`NCCL INFO NCCL version X` lines that differ between hosts/files; `CUDA driver version "
        "is insufficient for CUDA runtime version`.",
        92,
    ),
    Entry(
        "rendezvous-config", "error",
        "The rendezvous settings are malformed or inconsistent",
        "torchrun/c10d could not even start the rendezvous: a malformed endpoint or port, a "
        "missing MASTER_ADDR/MASTER_PORT, a master hostname that does not resolve, a rendezvous "
        "that is already closed (a stale store from a previous run), or nodes that disagree on "
        "the number of nodes.",
        "Pass the same, well-formed settings on every node, e.g.\n"
        "  ddpkit launch --nnodes 2 --node-rank <0|1> --master-addr 10.0.0.2 --master-port 29500 "
        "train.py\n"
        "For a closed rendezvous, use a fresh --rdzv-id (or restart the store on the master).",
        "ValueErrors about the rendezvous endpoint/port, `environment variable MASTER_ADDR "
        "expected, but not set`, `is not in \"MIN:MAX\" format`, `RendezvousClosedError`, "
        "`RendezvousStateError`, `Name or service not known` (also torchelastic's `host not found`) "
        "for the master.",
        91,
    ),
    Entry(
        "local-rank-argument", "error", "The script and its launcher disagree on the local-rank argument",
        "Scripts written for `python -m torch.distributed.launch` take their local rank as an argv "
        "option (`--local_rank`), not from LOCAL_RANK. torchrun passes none, torch 2.x's launch "
        "passes the dashed `--local-rank`: the ranks exit at start-up with an argparse error, or "
        "run with the option's default (often -1) and fail choosing their GPU.",
        "Start it with ddpkit, which reads the script (never runs it) and passes each rank the "
        "spelling it declares (or --local-rank-arg dash|underscore|none):\n  ddpkit launch "
        "--nproc_per_node=<G> --nnodes=<N> --node_rank=<R> --master_addr=<addr> train.py\n"
        "or make the script read it: local_rank = int(os.environ[\"LOCAL_RANK\"])",
        "argparse's `unrecognized arguments: --local-rank=0` (or `--local_rank=0`), `the following "
        "arguments are required: --local_rank`; `invalid device ordinal` or `Device index must "
        "not be negative` in a log that shows `local_rank=-1` or `set_device(-1)`.",
        96,
    ),
    Entry(
        "rank-assignment", "error",
        "Global ranks are duplicated or missing, or world sizes disagree",
        "Two processes claimed the same global rank, or ranks disagree on how many ranks there "
        "are. Typically two nodes were started with the same --node-rank, or with different "
        "--nnodes/--nproc-per-node.",
        "Start every node with the same --nnodes and --nproc-per-node and a unique --node-rank "
        "0..N-1:\n"
        "  ddpkit launch --nnodes <N> --node-rank <R> --nproc-per-node <G> --master-addr <addr> "
        "train.py",
        "`Bootstrap Root : rank X of N ranks has already checked in`, `mismatch in rank count`, "
        "NCCL comm lines with different `nranks`, the same rank reported by two hosts.",
        90,
    ),
    Entry(
        "ib-error", "error",
        "InfiniBand/RDMA (verbs) errors",
        "NCCL's InfiniBand transport failed: a verbs call (ibv_*) returned an error, a work "
        "completion came back with an error status, memory could not be registered (usually the "
        "locked-memory limit, `ulimit -l`), or GPUDirect RDMA is not usable.",
        "Raise the locked-memory limit: ulimit -l unlimited (docker: --ulimit memlock=-1)\n"
        "Check the HCA and port state: ibv_devinfo; choose one with NCCL_IB_HCA=mlx5_0\n"
        "To confirm it is IB: export NCCL_IB_DISABLE=1 (falls back to TCP sockets)",
        "`ibv_*` failures, `NET/IB : Got completion ... with error`, `IBV_WC_*` statuses, "
        "`RLIMIT_MEMLOCK`, `Cannot allocate memory` from ibv_reg_mr.",
        89,
    ),
    Entry(
        "p2p", "error",
        "Intra-node GPU peer-to-peer fails or hangs",
        "Direct GPU-to-GPU transfers inside one machine (CUDA P2P/IPC) failed, or a single-node "
        "multi-GPU job hung in its first collectives: on many cloud VMs and consumer boards P2P "
        "is broken by IOMMU/ACS settings or unsupported between the GPUs.",
        "Confirm by disabling P2P: export NCCL_P2P_DISABLE=1\n"
        "Inspect the topology: nvidia-smi topo -m (and check ACS/IOMMU on bare metal)",
        "`NCCL WARN` lines from transport/p2p.cc, `peer access is not supported`, CUDA IPC "
        "failures; a watchdog timeout in a job whose NCCL comms report `nNodes 1`.",
        87,
    ),
    Entry(
        "out-of-memory", "error",
        "A rank ran out of memory",
        "A rank exhausted GPU memory (CUDA out of memory) or host memory (allocator failure or "
        "the kernel's OOM killer), and the job went down with it.",
        "Lower the per-GPU batch size or sequence length, use gradient checkpointing or mixed "
        "precision, and try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
        "For host memory: fewer DataLoader workers; check dmesg -T | grep -i oom",
        "`CUDA out of memory`, `OutOfMemoryError`, `Cuda failure 'out of memory'`, "
        "`DefaultCPUAllocator: can't allocate memory`, `Out of memory: Killed process`; a rank "
        "killed by SIGKILL (`exitcode: -9`) while no rank printed any error (the OOM killer's "
        "signature, named as the likely cause).",
        86,
    ),
    Entry(
        "node-mismatch", "warning",
        "Nodes are configured differently",
        "The nodes do not look alike: they use different NCCL transports or plugins, different "
        "NCCL_* settings, or two different machines share one hostname (torchrun's c10d "
        "rendezvous and MASTER_ADDR go by hostname).",
        "Diff the nodes side by side: ddpkit doctor --nnodes <N> --node-rank <R> --master-addr "
        "<addr>\n"
        "Give every node the same NCCL_*/GLOO_* settings (ddpkit nccl-conf show) and a unique "
        "hostname (hostnamectl set-hostname node1).",
        "`Using network IB` on one node and `Using network Socket` on another, `NCCL_* set by "
        "environment` lines that differ, one hostname seen with different addresses.",
        80,
    ),
    Entry(
        "firewall", "error",
        "Connections between nodes time out (packets are dropped)",
        "Connection attempts to a peer time out instead of being refused: something between the "
        "nodes (a firewall, a security group, a wrong route) silently drops the packets. NCCL "
        "also opens further TCP connections on random ports after its bootstrap, so allowing "
        "only the master port is not enough.",
        "Allow all TCP traffic between the nodes on the private network (security group / "
        "ufw / iptables), or narrow NCCL's ports with net.ipv4.ip_local_port_range and allow "
        "that range.\n"
        "Check the path: ddpkit nics --to <peer-addr>, then ddpkit doctor --nnodes <N> "
        "--node-rank <R> --master-addr <addr>",
        "`Connection timed out` (ETIMEDOUT) connecting to a routable address; NCCL init that "
        "starts and never completes without any error.",
        75,
    ),
    Entry(
        "peer-unreachable", "error",
        "A peer or the master cannot be reached",
        "Connections to a peer or to the master's store were refused or failed, and nothing more "
        "specific explains it: the master is not running (yet), listens on another address or "
        "port, the address is wrong, or the peer already exited.",
        "Check that the master runs and that every node uses its reachable (private) address "
        "and the same port:\n"
        "  ddpkit nics --to <master-addr>\n"
        "  ddpkit doctor --nnodes <N> --node-rank <R> --master-addr <master-addr>",
        "`Connection refused`, `No route to host`, `Network is unreachable`, c10d `The client "
        "socket has timed out ... while trying to connect to (host, port)`.",
        70,
    ),
    Entry(
        "rendezvous-timeout", "error",
        "Not every node joined the rendezvous in time",
        "The rendezvous waited for all nodes/ranks and gave up: some node was never started, "
        "started with other settings, or could not reach the master's store.",
        "Start every node (same --nnodes, unique --node-rank) within the rendezvous timeout, "
        "and check reachability of the master first:\n"
        "  ddpkit doctor --nnodes <N> --node-rank <R> --master-addr <addr>",
        "`RendezvousTimeoutError`, `Timed out after N seconds waiting for clients. X/Y clients "
        "joined`, `Timed out initializing process group in store based barrier`.",
        65,
    ),
    Entry(
        "job-hung", "error",
        "The job hung: a rank is somewhere the others are not",
        "ddpkit dumped every rank's Python stack (py-spy) because no rank made progress (no "
        "output, no CPU time) for --hang-timeout seconds, or because you asked for it. Ranks are "
        "grouped by where they are; a rank that is not inside a collective while the others wait "
        "in one (or is in a different collective, or at a different line) holds the job up.",
        "Look at the named rank's stack (stacks/rank<R>.txt) and its source line: make every rank "
        "call the same collectives in the same order; a rank that only computes silently for a "
        "long time without using CPU (waiting on a GPU, a download) needs a larger "
        "--hang-timeout.",
        "A `stacks/` directory written by `ddpkit launch` (its `stacks.json`), or a run directory "
        "that has one.",
        88,
    ),
    Entry(
        "collective-timeout", "error",
        "A collective operation timed out",
        "A collective (all_reduce, broadcast, ...) did not complete within the process-group "
        "timeout: some rank never joined it, because it was stuck, slower, crashed, or issued "
        "collectives in a different order than the others.",
        "Look at what the lagging rank was doing at that point (its own log and traceback); "
        "make every rank issue the same collectives in the same order.\n"
        "More detail next time: TORCH_DISTRIBUTED_DEBUG=DETAIL TORCH_NCCL_DUMP_ON_TIMEOUT=1\n"
        "If the work is just slow, raise init_process_group(timeout=...).",
        "`Watchdog caught collective operation timeout: WorkNCCL(SeqNum=..., OpType=...)`, Gloo's "
        "`Timed out waiting Nms for recv/send operation`, `failed to pass monitoredBarrier`.",
        60,
    ),
    Entry(
        "connection-lost", "error",
        "A peer dropped the connection mid-job",
        "An established connection to another rank was reset or closed: the peer process died "
        "(look for its own failure first) or the network between the nodes dropped.",
        "Find the first failure on the peer named in the evidence (its log above this point); "
        "if it shows none, check the link between the nodes: ddpkit test --nnodes <N> ...",
        "`Connection reset by peer`, `Connection closed by peer`, `Broken pipe`, NCCL's "
        "`remote process exited or there was a network error` (ncclRemoteError).",
        50,
    ),
    Entry(
        "rank-failed", "error",
        "A rank failed and took the job down",
        "One rank exited first (with an error or killed by a signal) and torchrun stopped the "
        "others because of it.",
        "Read that rank's own output above its failure (torchrun --tee 3 or --log-dir keeps "
        "each rank's output apart) and fix what it reports; then rerun.",
        "torchrun's `Root Cause (first observed failure)` block (`rank : N`, `exitcode : X`), "
        "`failed (exitcode: X) local_rank: N`, NCCL `unhandled system error` without a more "
        "specific cause.",
        40,
    ),
    Entry(
        "no-failure", "info",
        "No failure found in the log",
        "Nothing in the log indicates a failure. Lines such as `NET/Plugin : No plugin found`, "
        "`Failed to open libibverbs` and `NET/IB : No device found` are normal on machines "
        "without InfiniBand: NCCL then uses TCP sockets.",
        "Nothing to fix in the log. If the job still misbehaves, rerun with NCCL_DEBUG=INFO "
        "NCCL_DEBUG_SUBSYS=INIT,NET and run the preflight checks: ddpkit doctor",
        "Only benign lines, or nothing that matches any other finding.",
        0,
    ),
)

CATALOGUE: dict[str, Entry] = {entry.id: entry for entry in _ENTRIES}

# The rows of `ddpkit doctor` without --log (see ddpkit.doctor.checks), for the docs.
PREFLIGHT: tuple[tuple[str, str], ...] = (
    ("interface", "the interface for inter-node traffic (`ddpkit nics`' choice, or the one the "
     "route to --master-addr leaves through) and its traps"),
    ("route", "with --master-addr: the route to the master (interface, source address, gateway)"),
    ("nccl-settings", "NCCL_SOCKET_IFNAME in effect and where it comes from (environment, "
     "NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf), plus `nccl-conf show` warnings"),
    ("hostname", "what the hostname resolves to: loopback (127.0.1.1) or a docker-bridge address "
     "is the Gloo trap, unless GLOO_SOCKET_IFNAME is set"),
    ("master-port", "whether --master-port (default 29500) can be bound here"),
    ("shm", "/dev/shm size and writability (fail below 256 MiB, warn below 1 GiB)"),
    ("open-files", "the open-file limit (warn below 4096)"),
    ("ephemeral-ports", "net.ipv4.ip_local_port_range: the ports NCCL connects on (firewalls must "
     "allow them), and whether the master port lies inside it"),
    ("infiniband", "devices in /sys/class/infiniband, their port states, NCCL_IB_DISABLE and the "
     "locked-memory limit"),
    ("gpus", "`nvidia-smi -L` (CUDA is never initialised)"),
    ("torch", "torch's version and CUDA build, read from its package metadata (torch is not "
     "imported)"),
)


def entry(finding_id: str) -> Entry:
    """The catalogue entry for ``finding_id`` (KeyError for an unknown id: a programming error)."""
    return CATALOGUE[finding_id]


def render_markdown() -> str:
    """``docs/findings.md``: every finding id with its meaning, how it is recognised and the fix."""
    parts = [
        "# `ddpkit doctor` findings",
        "",
        "<!-- Generated from src/ddpkit/doctor/catalogue.py (render_markdown); "
        "tests/unit/test_doctor_catalogue.py fails when this file is out of date. -->",
        "",
        "`ddpkit doctor --log FILE...` reads what a failed or hung run printed (NCCL INFO/WARN "
        "lines, torch/torchrun tracebacks, Gloo and c10d errors, from one or many nodes) and "
        "reports findings, most likely root cause first. Each has a stable id, a severity, an "
        "explanation, the evidence (`file:line`) and a concrete fix. The exit status is 1 when "
        "any finding is an error, 0 otherwise. `--json` prints one `ddpkit.doctor/1` document:",
        "",
        "Lines may carry NCCL's `host:pid:tid [dev]` prefix, launcher prefixes (`[node1:0]`, "
        "`[default0]:`, `[rank3]:`, mpirun's `[1,3]<stderr>:`), timestamps and glog headers, "
        "or none; several nodes may be mixed in one file, and a traceback may be flattened into "
        "one line. Give every node's log at once (`ddpkit doctor --log node0.log node1.log`): "
        "facts are correlated across files, e.g. the address rank 0 bootstrapped on against "
        "the address another node was refused by. `-` reads standard input. Input is streamed in "
        "constant memory; binary, truncated or non-UTF-8 files are read, not rejected. A path "
        "that cannot be read is the error `log-unreadable` (exit status 3).",
        "",
        "```json",
        '{"schema": "ddpkit.doctor/1", "ddpkit_version": "...", "findings": [{"id": "...", '
        '"severity": "error", "title": "...", "explanation": "...", "fix": "...", '
        '"evidence": [{"file": "...", "line": 1, "text": "..."}]}]}',
        "```",
        "",
        "| id | severity | meaning |",
        "| --- | --- | --- |",
    ]
    for item in _ENTRIES:
        parts.append(f"| [`{item.id}`](#{item.id}) | {item.severity} | {item.title} |")
    parts += [
        "",
        "Without `--log`, `ddpkit doctor` checks this node instead and prints one pass/warn/fail "
        "row per check, with a fix for each row that did not pass (`--json`: `ddpkit.doctor/1` "
        "with a `checks` list of `{id, title, status, detail, fix}`; exit status 1 when a "
        "check failed). The checks:",
        "",
    ]
    parts += [f"- `{check_id}`: {what}" for check_id, what in PREFLIGHT]
    for item in _ENTRIES:
        parts += [
            "",
            f"## {item.id}",
            "",
            f"**{item.title}** (severity: {item.severity})",
            "",
            item.explanation,
            "",
            f"*Recognised by:* {item.recognised}",
            "",
        ]
        example = REAL_EXAMPLES.get(item.id)
        if example is not None:
            line, source = example
            parts += [f"*Seen in a real log* ([{source}]({thread_url(source)})): `{line}`", ""]
        parts += [
            "*Fix:*",
            "",
            "```",
            item.fix,
            "```",
        ]
    return "\n".join(parts) + "\n"

