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
    if parts and line.rstrip().endswith(HOLE):
        # a value printed last may be empty, and a log's lines lose their trailing blanks
        parts[-1] = parts[-1].rstrip()
    return ".*?".join(re.escape(p) for p in parts)


# (where: a regex on the source file or None, what: a regex on the template, maps to, why).
# First match wins; case-insensitive. Ordered from the most specific cause to the generic.
Rule = tuple[str | None, str, str, str]

# The words of a check on what a program handed a library (argument, tensor, group, device...).
_CALLED_WRONGLY = (r"Tensor|tensor|dtype|\bdevice\b|sparse|dense|\bsize\b|shape|split|\bop\b"
                   r"|argument|must (?:NOT )?be|expected|Expected|cannot be None|not part of"
                   r"|group|ranks?\b")
# torch's checks that report another failure's aftermath or its own state, not the caller's
# arguments: a communicator aborted, destroyed, shut down or cleaned up (after an error, or in a
# teardown that only warns), a failed health check, the monitored barrier's report, a buffer
# registration, the communicator cache, the store's protocol, a socket's port, the agent's own
# rank bookkeeping
_AFTERMATH = (r"abort|destroy|shutdown|clean up|Health check failure|encountered error"
              r"|Caught exception|Successfully processed|register segment|communicator map"
              r"|ncclUniqueId|response expected|query type|listen fd|rank mapping mismatch")

# The launchers' own messages (tools/catalogue_messages.py --add): their settings, a worker's exit,
# ssh, no GPU. In RULES, before the generic ones, so that their info and warning lines (the
# hostfile DeepSpeed did not find and went on without) stay benign.
LAUNCHER_RULES: tuple[Rule, ...] = (
    # DeepSpeed's launcher (deepspeed/launcher/): its hostfile, node and GPU selection and its
    # multinode runners' settings are the launch's settings; a worker's exit, ssh, no GPU
    (r"^deepspeed/launcher/", r"no GPU resources", "cuda-error",
     "DeepSpeed's launcher counted no GPU on this machine"),
    (r"^deepspeed/launcher/", r"not reachable via ssh", "peer-unreachable",
     "DeepSpeed's launcher could not reach a host of the hostfile over ssh"),
    (r"^deepspeed/launcher/", r"exits with return code", "rank-failed",
     "a worker DeepSpeed's launcher started exited with an error"),
    # (launch.py with --save_pid asserts that no pid file of an earlier launch is left)
    (r"^deepspeed/launcher/", r"pid file exists", "rendezvous-config",
     "DeepSpeed's launcher found the pid file of an earlier launch (--save_pid): a previous "
     "run's state left behind"),
    (r"^deepspeed/launcher/", r"should not be a file|--no_python|argument is not supported",
     "invalid-usage", "DeepSpeed's launcher refused its arguments"),
    (r"^deepspeed/launcher/", r"[Hh]ostfile|[Hh]ost|slot|num_nodes|Num nodes|include|exclude"
     r"|world_info|launcher|devices per node|MIN:MAX|master addr|backend does not support"
     r"|Min nodes|node_rank",
     "rendezvous-config", "DeepSpeed's launch settings (its hostfile, the nodes and GPUs to use, "
     "its multinode runner)"),
    # Hugging Face accelerate's launchers (src/accelerate/: launchers.py's notebook_launcher,
    # commands/launch.py's `accelerate launch`, state.py, utils/launch.py)
    (r"^src/accelerate/", r"initialized before the `notebook_launcher`|has been initialized "
     r"before|should only be initialized inside|avoid running any instruction using"
     r"|outside import causing issues once the `notebook_launcher",
     "cuda-error", "CUDA was initialised in the notebook's own process before the launcher "
     "forked its workers, which cannot use it then"),
    (r"^src/accelerate/", r"another process is utilizing it|is already in use", "port-in-use",
     "accelerate found the main process's port taken"),
    (r"^src/accelerate/", r"RTX (?:3090|4000)|via P2P or IB", "p2p",
     "accelerate refused to run consumer GPUs without P2P unless NCCL's P2P and IB are off"),
    (r"^src/accelerate/", r"requires? (?:pytorch|torch|PyTorch|DeepSpeed|GDRCopy) ?>=|MPS not "
     r"available|not built with", "version-mismatch",
     "the torch (or DeepSpeed) installed is older than this launch needs"),
    (r"^src/accelerate/", r"main process (?:IP|port)|MASTER_ADDR|node_rank|multiple machines",
     "rendezvous-config", "accelerate's rendezvous settings (the machines, the main process's "
     "address and port, the node's rank)"),
    (r"^src/accelerate/", r"num_processes|number of processes|at least (?:2|two) "
     r"(?:processes|GPU)|GPU ids|number of (?:TPU )?devices|can only (?:pick|use) one"
     r"|cannot be used (?:together|with)|Unknown "
     r"(?:dynamo backend|mixed_precision)|should be a python script|should have a function named"
     r"|not supported|doesn.t support|You cannot use|when using `--|set `--|requires FSDP"
     r"|must be initialized before|Please make sure to properly initialize|assigned backend"
     r"|specified in the `parallelism_config`", "invalid-usage",
     "accelerate refused its arguments or a call made before its state was set up"),
    (r"^src/accelerate/", r".", "unexplained-failure",
     "accelerate's own check of what its launch needs (a package, a credential, its state): "
     "the message names it"),
    # PyTorch Lightning's launchers and cluster environments (1.6 on: pytorch_lightning/,
    # lightning_fabric/, lightning/{fabric,pytorch}/ strategies/launchers and plugins/environments)
    (r"(?:^|/)(?:lightning/(?:fabric|pytorch)|lightning_fabric|pytorch_lightning)/",
     r"SLURM|--ntasks|num_nodes|devices=|[Ee]nvironment variable|LSB_|JSM_|Kubeflow|job id",
     "rendezvous-config", "Lightning's cluster environment or its node and device counts do "
     "not match the scheduler's"),
    (r"(?:^|/)(?:lightning/(?:fabric|pytorch)|lightning_fabric|pytorch_lightning)/",
     r"start method|Forking is disabled|twice on the same Trainer|deferred initialization"
     r"|only create subprocesses once|local_rank > 0", "invalid-usage",
     "Lightning refused its launcher's settings or a second launch"),
    (r"(?:^|/)(?:lightning/(?:fabric|pytorch)|lightning_fabric|pytorch_lightning)/", r".",
     "unexplained-failure", "Lightning's launcher's own check: the message names it"),
    # Horovod's launcher (horovod/runner/)
    (r"^horovod/runner/", r"via ssh", "peer-unreachable",
     "horovodrun could not reach a host over ssh"),
    (r"^horovod/runner/", r"common interface", "interface-not-found",
     "horovodrun found no network interface all the hosts share"),
    (r"^horovod/runner/", r"port to bind", "port-in-use", "horovodrun found no free port"),
    (r"^horovod/runner/", r"support has not been built|Neither MPI nor Gloo", "invalid-usage",
     "Horovod was built without the controller the launch asks for (Gloo, MPI)"),
    (r"^horovod/runner/", r"exited with non-zero status|failed with exit code", "rank-failed",
     "a process horovodrun started exited with an error"),
    (r"^horovod/runner/", r"Timeout after", "rendezvous-timeout",
     "horovodrun's driver waited for its tasks to register and gave up"),
    (r"^horovod/runner/", r"No such controller", "invalid-usage",
     "horovodrun refused its controller setting"),
    (r"^horovod/runner/", r"digest did not match|did not return a response|Pipe is closed",
     "unexplained-failure", "horovodrun's own services could not talk to each other (a task "
     "from another horovodrun, or one that died): the lines before it name the failure"),
    (r"^horovod/runner/", r"did not complete successfully", "unexplained-failure",
     "horovodrun's tasks on the hosts (ssh, checks) failed: the lines before it say which"),
    (r"^horovod/runner/", r"host|slot|fewer than 2 hosts|LSF job|jsrun", "rendezvous-config",
     "horovodrun's host list, slots or platform"),
)

# torch's own Python outside torch.distributed (torchwheels.CORE), read at each raise. In RULES,
# before the generic ones, so that these files' info and warning lines stay benign.
TORCH_CORE_RULES: tuple[Rule, ...] = (
    # DistributedDataParallel's checks of the module and arguments it is given refuse the
    # program's use, except its consistency checks on its own state ("indicates a bug in DDP")
    (r"^torch/nn/parallel/distributed\.py", r"bug in (?:DDP|PyTorch)|BUG!|must not be None"
     r"|should be set by now", "internal-error",
     "DDP's check of its own state (it says it is a bug in DDP): an internal check"),
    (r"^torch/nn/parallel/distributed\.py", r".", "invalid-usage",
     "DistributedDataParallel refused the module or the arguments it was given (a module on "
     "the CPU or on several devices, no parameter needing a gradient, uninitialized "
     "parameters, a communication hook, a feature this build's NCCL lacks)"),
    (r"^torch/nn/modules/batchnorm\.py", r"SyncBatchNorm (?:expected input tensor|is only "
     r"supported)", "invalid-usage",
     "SyncBatchNorm used outside what it supports: an input not on a GPU, or no DDP process "
     "group of one GPU per process"),
    (r"^torch/nn/modules/batchnorm\.py", r".", "rank-failed",
     "a batch-norm layer's check of its input or its own parameters: the model's bug, not the "
     "distributed setup's; the rank raises an exception"),
    (r"^torch/utils/data/distributed\.py", r"^Invalid rank", "rank-assignment",
     "DistributedSampler was given a rank outside 0..num_replicas-1: the rank and the number "
     "of replicas (the world size) disagree"),
    (r"^torch/utils/data/distributed\.py", r"distributed package", "version-mismatch",
     "a torch build without torch.distributed"),
    (r"^torch/utils/data/distributed\.py", r"does not match", "internal-error",
     "DistributedSampler's check of its own index arithmetic: an internal check"),
    (r"^torch/cuda/__init__\.py", r"amdsmi|HIP|ROCR|ROCm", "unmapped",
     "AMD GPUs only (ROCm's amdsmi, HIP_VISIBLE_DEVICES)"),
    (r"^torch/cuda/__init__\.py", r"re-initialize CUDA in forked subprocess|not compiled with "
     r"CUDA|compiled without CUDA|is not visible \(CUDA_VISIBLE_DEVICES|cuda driver can't be "
     r"loaded|device UUIDs", "cuda-error",
     "torch found no usable GPU in this process: CUDA initialised before a fork, a torch "
     "built without CUDA, no driver, or CUDA_VISIBLE_DEVICES hiding the device"),
    (r"^torch/cuda/__init__\.py", r"^Invalid (?:peer )?device id", "duplicate-gpu",
     "a device index at or past the number of GPUs this process sees (more ranks per node "
     "than visible GPUs, or a rank's index used as a device)"),
    (r"^torch/cuda/__init__\.py", r"libcudart functions unavailable", "version-mismatch",
     "torch's CUDA runtime library does not load: a broken or mismatched build"),
    (r"^torch/cuda/__init__\.py", r".", "rank-failed",
     "a torch.cuda call refused (a storage call, a missing optional module, a ROCm setting): "
     "the rank raises an exception"),
    (r"^torch/multiprocessing/spawn\.py", r"terminated with", "unexplained-failure",
     "torch.multiprocessing.spawn reports a process that exited with an error or a signal: "
     "the process's own lines before it name the failure"),
)

# aws-ofi-nccl, NCCL's network plugin over libfabric (AWS EFA), read at its releases
# (catalogue_messages.py --add) (the rules are matched case-insensitively, as all of RULES)
_OFI = r"^aws-ofi-nccl/"  # (classify() puts the program's name before its files' paths)
AWS_OFI_RULES: tuple[Rule, ...] = (
    (_OFI, r"\bcu[A-Z]\w+(?:\(\))? failed|CUDA (?:runtime|driver|initialization|context|function"
     r"|flush)|cuCtx|cuMem|cuStream|Cuda failure", "cuda-error",
     "a CUDA call the network plugin made failed"),
    (_OFI, r"libfabric version|ncclGetVersion|backendVersion|requires GDRCopy|GDRCopy v2 API"
     r"|not compiled with|at compile time|Libfabric \d\.\d+ API|plugin version",
     "version-mismatch", "the net plugin, libfabric, GDRCopy or NCCL builds do not fit together"),
    (_OFI, r"^(?:NET/OFI )?(?:Invalid|Provided|Passed|Expected)\b|NULL|nullptr|not (?:been )?"
     r"initialized|already (?:finalized|closed|exists)|should not be reached|unexpected "
     r"|duplicate|out of range|inactive|in-use entries", "internal-error",
     "an internal check of the net plugin failed (its own state, or what NCCL passed it)"),
    (_OFI, r"\bfi_\w+|libfabric|provider|\bEFA\b|completion|completed with error|\bCQ\b"
     r"|endpoint|\bEP\b|domain|fabric|address vector|\bAV\b|\bMR\b|memory region|regist"
     r"|\brails?\b|RDMA|\bGDR|prov_errno|post(?:ing)? |protocol that worked", "ib-error",
     "the net plugin's RDMA transport over libfabric (AWS EFA) failed: a libfabric call, a "
     "completion, a memory registration"),
    (_OFI, r"\balloc|out of memory", "out-of-memory", "the net plugin could not allocate memory"),
    (_OFI, r"connect|accept|bootstrap", "peer-unreachable",
     "the net plugin could not connect to a peer"),
    # (any other WARN with words of its own; its INFO lines are benign, classify())
    (_OFI, r"^NET/OFI (?=.*[a-z]{4})", "internal-error", "the net plugin's own state or setup "
     "failed (a lock, a freelist, its topology file, a request it tracks): its lines before it "
     "say more"),
)

RULES: tuple[Rule, ...] = (
    *AWS_OFI_RULES,
    *LAUNCHER_RULES,
    *TORCH_CORE_RULES,
    (None, r"Duplicate GPU", "duplicate-gpu", "two ranks on one GPU"),
    (None, r"Bootstrap Root.*(?:mismatch|already checked in|out of range)|rank count|nranks <\*> vs"
     r"|Rank <\*> has appeared in both|duplicate (?:entries|ranks)",
     "rank-assignment", "ranks duplicated or world sizes disagree"),
    (None, r"Received <\*> death signal|got signal: <\*>|Closing process <\*> via signal"
     r"|Unable to shutdown process", "stopped-while-waiting",
     "the launcher was signalled: this node stopped while waiting, unless a failure came first"),
    (None, r"ignoring (?:address|mask)\b", "benign",
     "NCCL skips an address it cannot use (the WARN is followed by no error return)"),
    (None, r"pass NULL|is invalid\b|invalid arguments?\b|wrong socket state|unexpected socket state"
     r"|should not be called|must be set|Logic error|already been destroyed|is not ready"
     r"|are NULL\b|file descriptor is -1|invalid socket\b",
     "internal-error", "an internal check of the library failed (an argument NCCL's own code "
     "passed, a state it should not be in)"),
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
    # torch's checks of what the program handed it (an argument, a tensor, a group, a device):
    # torch.distributed refused the call, which is invalid-usage; not the checks that report
    # another failure's aftermath (an aborted or destroyed communicator, a failed health check)
    # or torch's own protocol and bookkeeping (the store's replies, a communicator map)
    (r"^torch/", rf"^(?!.*(?:{_AFTERMATH}))(?=.*(?:{_CALLED_WRONGLY}))", "invalid-usage",
     "torch refused the program's call (an argument, a tensor, a group or a device it does not "
     "accept): the rank raises an exception"),
    (None, _CALLED_WRONGLY,
     "rank-failed", "the program called the library wrongly: the rank raises an exception"),
    (None, r"deprecated|is ignored|will be ignored|ignoring|Ignoring|falling back|using default"
     r"|generated a random|NOTE:|Setting OMP_NUM_THREADS|not supported in MacOs"
     r"|already exists and will be overwritten", "benign", "advisory: nothing failed"),
)
# Read at each raise/enforce site in Gloo and torch (the context decides, not the wording alone);
# tried before RULES. Same shape as RULES.
SOURCE_RULES: tuple[Rule, ...] = (
    # torch's checks of the caller's setup whose meaning names a finding of its own
    (r"c10d/ProcessGroupNCCL", r"only supported with GPUs, no GPUs found", "cuda-error",
     "a NCCL process group where torch sees no GPU (no driver, a CPU-only torch, or "
     "CUDA_VISIBLE_DEVICES hiding every GPU)"),
    (r"elastic/agent/server/local_elastic_agent\.py", r"exceeds available GPUs",
     "duplicate-gpu", "--nproc-per-node starts more workers than CUDA_VISIBLE_DEVICES leaves "
     "GPUs"),
    (r"distributed/rendezvous\.py|elastic/rendezvous/",
     r"must be (?:an integer|a string)|node-specific arguments|number of nodes|protocol must be",
     "rendezvous-config", "the rendezvous URL, its scheme or its node counts are malformed"),
    (r"multiprocessing/redirects\.py", r"CRT _dup|C runtime DLL|C-runtime FILE", "unmapped",
     "Windows only (the C runtime DLLs torchrun's redirects load on Windows)"),
    (r"^src/proxy", r"WSAPoll", "unmapped", "Windows only (NCCL's proxy on Windows sockets)"),
    (r"gloo/rendezvous/file_store", r"File already exists|File cannot be (?:opened|created)",
     "rendezvous-config", "Gloo's FileStore (init_method file://): its key file is left from an "
     "earlier run, or cannot be opened (a path not shared by all ranks, or not writable)"),
    (r"gloo/transport/tcp/address", r"getpeername", "connection-lost",
     "getpeername(2) on a connected socket fails with ENOTCONN: the peer's end is gone"),
    (r"gloo/transport/tcp/address", r"getsockname", "internal-error",
     "getsockname(2) fails only on a bad descriptor (EBADF, ENOTSOCK): Gloo used a socket it "
     "had closed"),
    (r"gloo/transport/tcp/loop", r"epoll_(?:create|ctl)", "unexplained-failure",
     "epoll(7) failed: the errno in the line names the cause (EMFILE/ENFILE: the open-file "
     "limit; ENOMEM/ENOSPC: kernel memory or max_user_watches); no finding names OS limits"),
    (r"^gloo/", r"Missing pair in backing context|Key '<\*>' already set|No send to wait for"
     r"|Remaining bytes do not map|Unknown ai_family|Listener must be setup|Can only switch to "
     r"sync mode|duplicate buffer for slot|returned false in sync mode|tx_ cannot be empty"
     r"|unknown sa_family", "internal-error",
     "a GLOO_ENFORCE on Gloo's own state (a pair, a buffer slot, a queue): an internal check"),
    (r"c10d/Utils\.hpp", r"No environment variables passed", "internal-error",
     "getCvarString called by torch itself with no variable names"),
    (r"c10d/Utils\.hpp", r"Received an empty list", "invalid-usage",
     "a collective was given an empty list of tensors"),
    (r"distributed_c10d\.py", r"Cannot automatically create PG with empty tag|Coalescing "
     r"manager requires|IllegalWork|MPI backend doesn't support|Please use a device_id with index"
     r"|Unknown (?:c10d )?backend type|monitored_barrier is only implemented|rankset doesn't "
     r"include", "invalid-usage",
     "torch.distributed's API was called with arguments it rejects (a backend name, a "
     "device_id, a group's ranks, a call the backend lacks)"),
    (r"elastic/agent/server/api\.py", r"Error waiting on exit barrier", "stopped-while-waiting",
     "the agent's workers finished and it waited at the exit barrier for the other nodes' "
     "agents, which did not all arrive (still running, failed, or the store's host is gone)"),
    (r"elastic/agent/server/api\.py", r"Unknown worker", "internal-error",
     "the agent's own bookkeeping of its workers"),
    (r"elastic/multiprocessing/api\.py", r"does not match: <|is a file\b", "invalid-usage",
     "a launcher option is malformed (--redirects/--tee, or --log-dir that is a file)"),
    (r"elastic/multiprocessing/api\.py", r"already initialized\. Most likely", "internal-error",
     "the process context was started twice: a bug of the launcher or agent that drives it"),
    (r"elastic/multiprocessing/api\.py", r"did not exit after .* abandoning", "cuda-error",
     "a worker survived SIGKILL: stuck in the kernel (uninterruptible sleep, e.g. wedged on "
     "the GPU or NIC driver); the host needs a check"),
    (r"elastic/multiprocessing/errors", r"Failed to parse reply file|no error file defined",
     "rank-failed", "written when a worker failed: its error file is unreadable or has nowhere "
     "to go; the worker's failure is the cause"),
    (r"elastic/multiprocessing/tail_log", r"error in log tailer", "benign",
     "torchrun's log tailer (--tee) failed; the workers are not affected"),
    (r"elastic/rendezvous/\w+_rendezvous_backend", r"state object is corrupt", "rendezvous-config",
     "the rendezvous state in the store is not torch's (another job, or a stale store, under the "
     "same run id)"),
    (r"elastic/rendezvous/etcd_server", r"process exited with the code", "rendezvous-config",
     "the etcd server the rendezvous needs exited at start"),
    (r"elastic/rendezvous/etcd_server", r"No etcd server process started", "internal-error",
     "EtcdServer used before start(): a bug of the code that drives it"),
    # distributed checkpointing's strict load (default_planner.create_default_local_load_plan,
    # state_dict._load_model_state_dict and _load_optim_state_dict): a key of the state_dict handed
    # to load() that the checkpoint does not hold, under strict loading (DefaultLoadPlanner's
    # allow_partial_load=False, StateDictOptions.strict=True); and the options that contradict
    # what the call passed. The call does not fit the checkpoint: a checkpoint saved from another
    # model, or saved before the optimizer had state (its first step)
    (r"^torch/distributed/checkpoint/", r"Missing key|Missing optimizer state|optim_only is set"
     r"|The option indicates that", "invalid-usage",
     "distributed checkpointing refused the load: the state_dict handed to it holds a key that the "
     "checkpoint lacks (saved from another model, or before the optimizer's first step), or the "
     "call's options contradict what it passed"),
    (r"elastic/rendezvous/etcd_store", r"not found in EtcdStore", "rendezvous-timeout",
     "raised when the key is still not published after the store's timeout"),
    (r"elastic/rendezvous/utils", r"timer has already started", "internal-error",
     "the rendezvous keep-alive timer renamed after start: torch's own bookkeeping"),
    (r"distributed/run\.py", r"^Cuda is not available", "cuda-error",
     "--nproc-per-node gpu, and torch.cuda.is_available() is False on this node (no driver, a "
     "CPU-only torch, or CUDA_VISIBLE_DEVICES hides every GPU)"),
    (r"distributed/run\.py", r"is not available\.$|Could not find entrypoint", "invalid-usage",
     "--nproc-per-node names a device type this torch lacks, or --logs-specs names no installed "
     "entry point"),
    (r"^src/include/checks\.h", r"Thread creation failed", "unexplained-failure",
     "std::thread threw (its what() in the line: usually EAGAIN, the process or thread limit); "
     "no finding names OS limits"),
    (r"^src/init", r"Attempt to use communicator before the previous operation", "invalid-usage",
     "ncclCommEnsureReady, called by the API functions: a nonblocking communicator used before "
     "its init (or its last call) returned ncclSuccess"),
    (r"^src/init", r"MNNVL is not supported on this system", "invalid-usage",
     "ncclSystemError when NCCL_MNNVL_ENABLE=1 forces multi-node NVLink on a system without it"),
    (r"^src/proxy", r"Get (?:listenSock|peers\[<\*>\]\.sock) fd fails", "internal-error",
     "ncclSocketGetFd fails only for a NULL socket: the proxy's own state"),
    (r"^src/transport/net_socket", r"socket progress error", "connection-lost",
     "a socket transfer to a peer failed (the WARN before it names the call and its errno)"),
    # torch's c10d C++ (the stored .cpp versions and the wheels' headers), read at each raise
    (r"c10d/socket\.cpp", r"Winsock", "unmapped", "Windows only (WSAStartup)"),
    (r"c10d/socket\.cpp", r"port number of the socket cannot be retrieved|cannot be switched to "
     r"(?:non-)?blocking mode|socket is not initialized|getsockname failed", "internal-error",
     "getsockname(2)/fcntl(2) on c10d's own socket fail only on a bad descriptor: torch's own "
     "state"),
    (r"c10d/ProcessGroup(?:Gloo|NCCL)\.cpp", r"Cannot use ReduceOp|Unhandled ReduceOp|Invalid "
     r"(?:backend|scalar type)|Work needs to be completed|does not support list of lists"
     r"|getDuration", "invalid-usage",
     "the program asked the process group for a reduction, dtype or Work call it does not "
     "support (the exception names it)"),
    (r"c10d/ProcessGroupNCCL\.cpp", r"only allowed with NCCL >=|requires NCCL>=", "invalid-usage",
     "a feature (CUDA graph capture, PreMulSum) that needs a newer NCCL than this torch was "
     "built with"),
    (r"c10d/ProcessGroupNCCL\.cpp", r"GPU devices are not known", "invalid-usage",
     "a collective before any device was set: torch.cuda.set_device(local_rank) or "
     "init_process_group(device_id=...) is missing"),
    (r"c10d/ProcessGroupNCCL\.cpp", r"retrieving ncclUniqueId from \[0\]", "peer-unreachable",
     "the rank waited in the store for rank 0's ncclUniqueId and the get failed: rank 0 never "
     "reached NCCL init, died, or its store is out of reach"),
    (r"c10d/ProcessGroupNCCL\.cpp", r"Communicators not populated", "internal-error",
     "TORCH_INTERNAL_ASSERT on the communicator cache: torch's own state"),
    (r"c10d/ProcessGroupNCCL\.cpp", r"^nccl_trace: ", "benign",
     "the flight recorder's trace, logged with a failure that other lines report"),
    (r"c10d/ProcessGroupNCCL\.cpp", r"Some NCCL operations have failed or timed out",
     "collective-timeout", "the watchdog saw a collective fail or pass its timeout "
     "(the preceding watchdog line says which)"),
    (r"c10d/ProcessGroupNCCL\.cpp", r"OnCompletion hook requires", "invalid-usage",
     "register_comm_hook's completion hook needs TORCH_NCCL_ENABLE_TIMING=1"),
    (r"c10d/ProcessGroupNCCL\.hpp", r"TORCH_NCCL_DEBUG_INFO_(?:PIPE|TEMP)_FILE is empty",
     "invalid-usage", "the flight recorder's dump path variable is set but empty"),
    (r"c10d/NCCLUtils\.(?:cpp|hpp)", r"debugInfoWriter already registered|getDuration",
     "invalid-usage", "an API call torch refuses (a second debug-info writer, a Work's duration "
     "without timing)"),
    (r"c10d/NCCLUtils\.(?:cpp|hpp)", r"Error opening file for writing NCCLPG debug info",
     "benign", "the flight recorder's dump file could not be written; the failure that "
     "triggered the dump is in other lines"),
    (r"c10d/NCCLUtils\.hpp", r"segment handle|Segment with ptr", "internal-error",
     "the CUDA caching allocator's buffer registration with the communicator: torch's own state"),
    (r"c10d/TCPStore\.cpp", r"use_libuv was requested", "invalid-usage",
     "USE_LIBUV=1 (or use_libuv=True) with a torch built without libuv: unset it"),
    (r"c10d/Utils\.hpp", r"larger than INT_MAX", "invalid-usage",
     "a tensor too large for one Gloo send/recv (over INT_MAX bytes): split it"),
    (r"c10d/Utils\.hpp", r"failed to send, sent 0 bytes", "connection-lost",
     "send(2) wrote nothing on a store or Gloo socket: the peer closed it"),
    (r"distributed_c10d\.py", r"c10d backend (?:creator function )?already exist|unknown c10d "
     r"backend type", "invalid-usage",
     "Backend.register_backend's asserts (torch 1.11 to 2.6): a backend name registered twice, or "
     "a backend type torch does not know"),
    (r"distributed_c10d\.py", r"GLOO options not supported|Invalid backend", "invalid-usage",
     "init_process_group/new_group was given a backend name or options it rejects"),
    (r"distributed_c10d\.py", r"Expected timeout argument to be of type", "invalid-usage",
     "init_process_group(timeout=...) given something other than a datetime.timedelta"),
    (r"elastic/agent/server/api\.py", r"Unknow worker", "internal-error",
     "the agent's own bookkeeping of its workers (torch 1.9's spelling)"),
    (r"elastic/multiprocessing/__init__\.py", r"is not empty, please provide an empty log_dir",
     "invalid-usage", "--log-dir names a directory that is not empty (torch 1.9-1.x)"),
    (r"elastic/multiprocessing/tail_log", r"error in log tailor", "benign",
     "torchrun's log tailer (--tee) failed; the workers are not affected (older spelling)"),
    (r"distributed/rendezvous\.py|elastic/rendezvous/", r"No handler for <\*>://", "rendezvous-config",
     "init_method (or the rendezvous URL) uses a scheme torch has no handler for"),
    (r"c10d/NCCLUtils\.cpp", r"^Original reason for failure was", "unexplained-failure",
     "the tail of an aborted communicator's error: it quotes the earlier failure, whose own "
     "line names the cause"),
    (r"c10d/ProcessGroupNCCL\.cpp", r"taking the entire process down", "unexplained-failure",
     "the watchdog ends the process after a failed or timed-out collective; the lines before "
     "it say which (a timeout, an NCCL error, a peer gone)"),
    (r"c10d/TCPStoreBackend\.cpp", r"control pipe", "unexplained-failure",
     "pipe(2)/write(2) for the store's own thread failed: the errno names the OS limit (open "
     "files, memory); no finding names OS limits"),
    (r"c10d/socket\.cpp", r"Failed to listen on socket initialized from fd", "unexplained-failure",
     "listen(2) on a socket handed over by the launcher failed: the errno in the line names why"),
    (r"distributed/distributed\.py|elastic/.*\.py", r"^Creating c10d store on", "benign",
     "the launcher's settings as it creates its store; 'timeout' is a label, not an event"),
)
_COMPILED = tuple((re.compile(w, re.I) if w else None, re.compile(t, re.I), m, r)
                  for w, t, m, r in RULES)
_SOURCE = tuple((re.compile(w) if w else None, re.compile(t), m, r) for w, t, m, r in SOURCE_RULES)
# What an NCCL WARN's code path returns (tools/msgresult.py): the codes that name a kind.
_CODES = frozenset({"ncclUnhandledCudaError", "ncclInvalidUsage", "ncclInvalidArgument",
                    "ncclInternalError", "ncclRemoteError", "ncclSystemError"})
# The catch-all wording rules (a word, not a cause) that a result code overrides.
_BROAD = {"peer-unreachable": "a connection", "rank-failed": "ranks or arguments"}
_CONFIG = re.compile(r"config|NCCL_[A-Z]|attribute|CTA", re.I)


def by_result(template: str, result: frozenset[str]) -> tuple[str, str] | None:
    """The mapping an NCCL WARN's result code gives (``msgresult.outcomes``), or None."""
    codes = sorted(result & _CODES)
    said = "returns " + "/".join(codes)
    if "ncclUnhandledCudaError" in codes:
        return "cuda-error", f"{said}: a CUDA call failed"
    if "ncclInvalidUsage" in codes or ("ncclInvalidArgument" in codes and (
            "api" in result or _CONFIG.search(template))):
        return "invalid-usage", f"{said}: the program's call or an NCCL setting/config is invalid"
    if "ncclInternalError" in codes or "ncclInvalidArgument" in codes:
        return "internal-error", f"{said}: an internal check (NCCL's own state or arguments)"
    if "ncclRemoteError" in codes:
        return "connection-lost", f"{said}: a peer's process exited or the network failed"
    if codes:
        return ("unexplained-failure", f"{said}: a system call failed; the call and its errno "
                "are in the line (any call: socket, poll, file), and no finding names them all")
    if result and result <= {"continues", "ncclSuccess", "api"}:
        return "benign", "NCCL warns and goes on: no error return follows the WARN"
    if result & {"propagated", "returns"}:
        return ("unexplained-failure", "returns the error of a call it made (or ends its "
                "thread) without a code of its own: the source cannot say more")
    return None
MIN_MATCHER_LITERAL = 10  # characters of literal text a matcher needs to be recognised


# Python's builtin exceptions whose documented meaning is a refused argument: ValueError ("an
# argument that has the right type but an inappropriate value"), TypeError (an object "of
# inappropriate type"), NotImplementedError (a case not supported)
_REFUSING_RAISES = frozenset({"raise ValueError", "raise TypeError", "raise NotImplementedError"})
# torch's own words for a failed check of its own state: "This indicates a bug in DDP, please
# report an issue to PyTorch", "BUG! Expected rank_cond to be true"
_TORCH_BUG = re.compile(r"indicates a bug|[Pp]lease report (?:an issue|a bug|this)|\bBUG!")


def classify(source: str, file: str, template: str, level: str,
             result: frozenset[str] = frozenset(), call: str = "") -> tuple[str, str]:
    """(finding id | "benign" | "unexplained-failure" | "unmapped", why) for one template;
    ``result``: what an NCCL WARN's code path returns (``msgresult.outcomes``); ``call``: what
    prints or raises it (``raise ValueError``)."""
    literal = max(len(p) for p in matcher(template).split(".*?")) if template else 0
    if source == "aws-ofi-nccl":  # its files' paths are like NCCL's own (src/..., include/...)
        if level != "error":  # NCCL_OFI_INFO: what the plugin chose or tried; it fails in a WARN
            return "benign", "the net plugin's INFO line (its failures are its WARN lines)"
        file = f"{source}/{file}"
    if source == "torch" and level == "error" and _TORCH_BUG.search(template):
        return "internal-error", "torch says the check that failed is a bug of its own"
    for where, what, maps, why in _SOURCE:
        if (where is None or where.search(file)) and what.search(template):
            return maps, why
    for where, what, maps, why in _COMPILED:
        if (where is None or where.search(file)) and what.search(template):
            coded = by_result(template, result) if maps == "internal-error" else None
            if coded and coded[0] in ("invalid-usage", "connection-lost"):
                maps, why = coded  # a check's wording, in a public function, on a setting, or
                # on a socket the peer closed (ncclRemoteError)
            if where is None and maps in _BROAD and result & _CODES == {"ncclInternalError"}:
                # a word such as "connect" or "ranks" in an assertion of NCCL's own state
                maps, why = "internal-error", ("returns ncclInternalError: an internal check "
                                               "(its wording only mentions " + _BROAD[maps] + ")")
            failing = (r"retry|timeout|timed out|refused|closed|abort|exceed" if level == "info"
                       else r"fail|error|retry|timeout|timed out|refused|closed|abort|exceed")
            if (level != "error" and maps not in ("benign", "stopped-while-waiting")
                    and not re.search(failing, template, re.I)):
                # NCCL INFO "Failed to open libibverbs": a fallback, not a failure
                return "benign", f"{level} line (nothing failed) about: " + why
            return maps, why
    if (source == "torch" and level == "error" and file.startswith("torch/distributed/")
            and call.startswith(("raise ", "logger.")) and literal >= MIN_MATCHER_LITERAL):
        # the rest of torch.distributed's APIs (catalogue_messages.TORCH_MORE_FILES), where no
        # rule above read the template
        if call in _REFUSING_RAISES:
            return "invalid-usage", (f"torch.distributed's API {call[6:]}: by Python's documented "
                                     "meaning, an argument or a case it does not accept, from "
                                     "the program that called it")
        return "unexplained-failure", (f"torch.distributed's API ({call}): a check of its own "
                                       "state or of what it computed, which no launch setting "
                                       "explains; the line names what failed")
    if level == "info":
        return "benign", "informational (NCCL INFO / LOG(INFO) / logger.info)"
    if level == "warning":
        return "benign", "a warning that does not stop the run"
    if literal < MIN_MATCHER_LITERAL:
        return "unmapped", "too little literal text to recognise in a log"
    coded = by_result(template, result)
    if coded:
        return coded
    return ("unexplained-failure",
            "an internal check or error with no setup cause: reported as a failure seen, "
            "with the next step")
