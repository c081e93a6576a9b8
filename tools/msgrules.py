"""The mapping rules of the message catalogue by wording: where a template was printed (a regex
on its source file) and what it says decide what ddpkit makes of it (a finding id, benign, or
unmapped). The launchers', torch core's and the net plugin's own tables come first, then the
generic ones. Used by msgmap.classify; msgsource_rules.py holds the rules read at each raise site."""

from __future__ import annotations

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
     r"|outside import causing issues once the `notebook_launcher"
     r"|known to initialize (?:CUDA|device) upon import",
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
     r"CUDA is already initialized|re-initialize CUDA in forked subprocess", "cuda-error",
     "CUDA was initialised in the parent process before Lightning forked its workers, which "
     "cannot use it then (_check_bad_cuda_fork)"),
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
     r"loaded|device UUIDs|CUDA call failed lazily at initialization", "cuda-error",
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
    # NVLink SHARP (NVLS): multicast objects over the NVSwitches, which NCCL's own words lay on
    # the Fabric Manager or the NVSwitches (src/transport/nvls.cc), not on peer-to-peer
    (None, r"NVLink SHARP|NVLS\) Multicast|Fabric Manager", "cuda-error",
     "NVLink SHARP's multicast objects: the Fabric Manager or the NVSwitches"),
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
