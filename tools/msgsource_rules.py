"""The message catalogue's rules read at each raise/enforce site of Gloo and torch: the context
decides, not the wording alone. Tried before msgrules.RULES, in the same shape; matched
case-sensitively."""

from __future__ import annotations

from msgrules import Rule

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
    # torchrun's and torch.distributed.launch's checks of their own arguments that are not
    # rendezvous settings: the invalid-usage entry names --nproc-per-node and --log-dir outright
    (r"distributed/(?:run|launch)\.py", r"^Unsupported nproc_per_node value|local_ranks_filter must"
     r"|--logdir must be|you must also set the '--use[-_]env' flag", "invalid-usage",
     "torchrun (or torch.distributed.launch) refused one of its own arguments: a --nproc-per-node "
     "that is neither a number nor a device type (a script's argument in its place), a "
     "--local-ranks-filter or --log-dir of the wrong form, --no-python without --use-env"),
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
    # torchrun's and torch.distributed.launch's options that exclude each other (DeepSpeed's
    # launcher copies the words): a refused combination of flags, not a rendezvous setting
    (r"distributed/(?:run|launch)\.py", r"^Don't use both", "invalid-usage",
     "torchrun refused two of its options given together"),
    # torchelastic's get_env_variable_or_raise (elastic/utils/api.py): a variable the rendezvous
    # reads (MASTER_ADDR, RANK, ...) is not set, as init_process_group's env:// says it
    # (causes/unset_variable.py)
    (r"elastic/utils/api\.py", r"expected, but not set", "rendezvous-config",
     "a variable the rendezvous reads is not set: the script was started without a launcher "
     "that sets it"),
    # messages whose own words are too common to tell them from another program's line: a
    # rank's failure as collective_utils words it, the pipeline's check of a tensor count
    (r"distributed/collective_utils\.py", r"^Rank <\*> failed", "unmapped",
     "'Rank N failed': words too common to recognise as this message in a log"),
    (r"distributed/pipelining/_utils\.py", r"^<\*>(?:\[<\*>\])?: expected <\*>(?: tensors)?, got",
     "unmapped", "'<name>: expected N, got M': words too common to recognise in a log"),
    (r"c10d/socket\.cpp", r"Failed to listen on socket initialized from fd", "unexplained-failure",
     "listen(2) on a socket handed over by the launcher failed: the errno in the line names why"),
    (r"distributed/distributed\.py|elastic/.*\.py", r"^Creating c10d store on", "benign",
     "the launcher's settings as it creates its store; 'timeout' is a label, not an event"),
)
