"""The line patterns: which log lines become which events (a table, not code).

Every pattern names its *triggers*: literal strings at least one of which occurs in every line the
pattern can match. The scanner only decodes and regex-matches lines that contain a trigger, and
only against the patterns whose triggers they contain.

The scanner does not search for the triggers themselves: it first looks for the *anchors*
(doctor/log/anchor_words.py, ``ANCHORS``), each a literal or a regex that starts with one (its
key), all found in one Aho-Corasick pass over a buffer (doctor/log/anchors.py). Every trigger must
match an anchor (a unit test checks), so no trigger line is missed; only lines with an anchor are
then checked for triggers.

A pattern with no triggers runs only on the lines that follow a ``follow`` trigger (torchrun's
error summary, NCCL's ``Last error:``). ``claims`` stops later patterns from also reading a line;
``multi`` yields one event per match (flattened lines hold several).
"""

from __future__ import annotations

import re

from ddpkit.doctor.log.cause_lines import CAUSE_PATTERNS, PYSPY_FRAMES, PYSPY_STATUS
from ddpkit.doctor.log.end_lines import (
    CGROUP_OOM_WORDS,
    END_PATTERNS,
    FIRST_FAILED_CODE,
    FIRST_FAILED_HEAD,
    FIRST_FAILED_NAME,
    OPEN_MPI_SIGNALED,
    PG_SHUTDOWN,
    SRUN_TASKS,
    TERMINATE,
    TERMINATE_OTHER,
)
from ddpkit.doctor.log.facts.kinds import CUDA_DISTINCT_ERRORS, CUDA_UNLOADED, winsock_code
from ddpkit.doctor.log.info_lines import INFO_PATTERNS
from ddpkit.doctor.log.kinds import EventKind
from ddpkit.doctor.log.line_pattern import LinePattern
from ddpkit.doctor.log.line_pattern import fallback_pattern as _fb
from ddpkit.doctor.log.line_pattern import pattern as _p
from ddpkit.doctor.log.prefixes import BARE_RAISED, LINE_PREFIXES
from ddpkit.launch.torchrun.torch_log import glog_header
from ddpkit.launch.torchrun.tracebacks import EXCEPTION_TYPE, IGNORED_HEAD

# Event kinds that show something failed (whatever the rule that reads them made of it;
# rules/unexplained.py reads them, and the scan reads a log's quiet tail when it yielded none).
FAILURE_KINDS = frozenset({
    "failure-line", "exception", "nccl-warn", "nccl-error", "connect-error", "connection-lost",
    "watchdog", "watchdog-frame", "work-progress", "gloo-timeout", "barrier-failed",
    "agent-failed", "summary-exit", "summary-signal", "child-failed", "bootstrap-retcode",
    "ib-error", "shm-error", "p2p-error", "oom", "rdzv-timeout", "rdzv-config",
    "rdzv-connection", "resolve-failed", "port-in-use", "no-interface", "gloo-mesh-failed",
    "device-ordinal",  # CUDA's invalid device ordinal, torch's negative device index
    "mpi-rank-signaled",  # Open MPI's launcher reporting a rank a signal ended
})
FACT_KIND = "job-fact"  # lines read only for the facts the causes read (doctor/log/facts/)
# Lines after which the next N lines are examined whatever they contain.
FOLLOW: dict[str, int] = {"Root Cause": 8, "Last error:": 2, "ChildFailedError": 5,
                          # c10d's bind warnings, then its "failed to listen" at error level
                          "already in use": 2,
                          # torchrun's launch configs and a rendezvous' result, one per line
                          # (agent/server/api.py, launcher/api.py)
                          "elastic_operator": 16, "Rendezvous complete": 12,
                          "Using devices": 64,
                          # C++'s std::terminate: the exception's message is on the next line,
                          # "  what():  [enforce fail at gloo/.../device.cc:88] ... Unable to find"
                          "terminate called": 2,
                          # NCCL's failure at its origin, then the first line of its return
                          # chain, "<file>:<line> -> <code>" (causes/nccl_result.py)
                          "NCCL WARN": 2,
                          # an assertion's message, which a traceback may post on the lines
                          # after "AssertionError:" (vLLM's PyNcclCommunicator's device check,
                          # causes/communicator_device.py)
                          "AssertionError:": 2,
                          # py-spy's dump: a thread's frames, one a line (causes/pyspy_dump.py)
                          **dict.fromkeys(PYSPY_STATUS, PYSPY_FRAMES),
                          # pybind11 refusing a constructor's arguments: its signatures, one per
                          # line, then "Invoked with: " and the values (causes/store_arguments.py)
                          "Error: __init__(): incompatible constructor arguments": 8,
                          # the launchers' report of the first process that exited non-zero,
                          # its name and exit code on the lines after (end_lines.FIRST_FAILED_*;
                          # Open MPI's wraps its head, PRRTE's twice, and a blank line follows)
                          FIRST_FAILED_HEAD: 5}
# A "NET/Socket : Using" line that ends there: its interfaces follow, one per line.
SOCKET_LIST_HEAD, SOCKET_LIST_LINES = "NET/Socket : Using", 16

_ADDR = r"(?P<addr>[^\s<>\[\](),]+)"
# Lines reporting a failed connect say "connect"/"Connection" or carry an *Error name.
_CONNECT_ERRORS = ("onnect", "rror")
_LOST = ("onnect", "rror")
_ROOT = ("Root Cause",)
_LAST = "Last error:"

PATTERNS: tuple[LinePattern, ...] = (
    # --- facts NCCL states at INFO level (doctor/log/info_lines.py; none claims its line) ---
    *INFO_PATTERNS,
    _p(EventKind.NCCL_ERROR, ("NCCL error",),
       r"NCCL error in:? ?(?P<where>[^,]*), (?P<detail>[^,(]+?)\s*(?:\(run with|,|$)"),
    # nccl-tests' NCCLCHECK: "HOST: Test NCCL failure common.cu:777 'unhandled cuda error'", from
    # 2.13 with NCCL's last warning after " / " (often empty) and a "(run with ...)" hint.
    _p(EventKind.NCCL_ERROR, ("NCCL failure",),
       r"Test NCCL failure (?P<where>[^\s']+) '(?P<detail>[^'/(]*[^'/(\s])"),
    # TensorRT-LLM's NCCLCHECK (and nccl-tests' older one): "Failed, NCCL error %s:%d '%s'"
    _p(EventKind.NCCL_ERROR, ("NCCL error",),
       r"NCCL error (?P<where>[^\s',]+:\d+) '(?P<detail>[^'\n]+)'"),
    # CUDA's cudaErrorCudartUnloading, cudaGetErrorString's "driver shutting down" (CUDA runtime
    # API, driver_types.h: "a CUDA Runtime API call cannot be executed because it is being called
    # during process shut down, at a point in time after CUDA driver has been unloaded"), in any
    # check's words (torch's "CUDA error: %s", Gloo's CUDA_CHECK, "Error at: <file>:<line>: %s",
    # inside GLOO_ENFORCE_EQ's "[enforce fail at ...] error == cudaSuccess. 29 vs 0. "): an
    # object destroyed at the process's exit, after CUDA; the run's work is over, so the line,
    # and the C++ terminate it ends, is no failure of the run's (rules/unexplained.py)
    _p(EventKind.BENIGN, (CUDA_UNLOADED,), rf"(?P<what>{CUDA_UNLOADED})",
       fixed=(("at_exit", "cuda-unloaded"),), claims=True),
    # a communicator aborted by ProcessGroupNCCL's own shutdown, at the program's teardown
    # (end_lines.PG_SHUTDOWN): no failure of the run's
    _p(EventKind.BENIGN, (PG_SHUTDOWN,), rf"(?P<what>{PG_SHUTDOWN})",
       fixed=(("at_exit", "pg-shutdown"),), claims=True),
    # CPython's report of an exception it cannot raise and ignores (rules/ignored.py)
    _p(EventKind.BENIGN, (IGNORED_HEAD,),
       rf"(?P<what>{IGNORED_HEAD}):? ?(?P<object>[^\n]{{0,160}})", fixed=(("ignored", "1"),),
       claims=True),
    _p(EventKind.EXCEPTION, ("Error: ", "Exception: "),
       # (also a name in lower camel case, NCCL's result's: torch's "ncclSystemError: ..." line)
       rf"(?<![\w.])(?P<type>{EXCEPTION_TYPE}|(?:[A-Za-z_]\w*\.)*[a-z]\w*(?:Error|Exception)): "
       r"(?P<message>[^\n]{0,200})",
       # torchrun's agent told to stop (elastic/multiprocessing/api.py, _terminate_process_handler:
       # SignalException(f"Process {os.getpid()} got signal: {sigval}")) is the launcher stopped,
       # and torch.multiprocessing's ProcessExitedException ("process %d terminated with signal
       # %s", "... with exit code %d"; multiprocessing/spawn.py) a parent reporting its child's
       # end: the death facts read both, neither is a process's own failure
       skip_if=("SignalException: Process", "ProcessExitedException: process")),
    # the same, raised without a message: its type alone on the line (prefixes.BARE_RAISED)
    _p(EventKind.EXCEPTION, ("rror", "Exception"), BARE_RAISED),
    # --- specific failures first: they claim their line ---
    _p(EventKind.IB_ERROR, ("NCCL WARN", _LAST),
       r"(?P<detail>(?:Call to )?ibv_\w+[^\n]*|NET/IB ?: (?!No device found|Using )[^\n]*"
       r"|IBV_WC_\w+[^\n]*|RLIMIT_MEMLOCK[^\n]*|transport retry counter exceeded[^\n]*"
       # the EFA/libfabric net plugin's (aws-ofi-nccl) memory registration failing: "NET/OFI
       # Unable to register memory (type = %d) for device %d. RC: %d, Error: %s", "Could not
       # register memory ...", "Couldn't register memory region ..."
       r"|NET/OFI [^\n]*register memory[^\n]*)",
       skip_if=("NCCL INFO",), claims=True),
    # TensorPipe's ibverbs wrapper (torch.distributed.rpc's transport, tensorpipe/common/ibv.h:
    # each ibv_* call checked with TP_THROW_SYSTEM_IF, "In operator() at
    # tensorpipe/common/ibv.h:172 \"\": Operation not supported"): an RDMA verbs call failed
    _p(EventKind.IB_ERROR, ("rror",), r"(?m)^(?P<detail>[^\n]*\btensorpipe/common/ibv\.h:\d+[^\n]*)",
       claims=True),
    # (torch's MapAllocator.cpp, sharing a tensor between processes through a /dev/shm file it
    # names /torch_<pid>_...: "unable to write to file <%s>: %s (%d)" and "unable to mmap %zu bytes
    # from file <%s>: %s (%d)", the latter with ENOMEM when /dev/shm has no room. torch 0.x's
    # THAllocator.c printed the write's failure with no errno, "unable to write to file <%s>"
    # and THError's " at FILE:LINE": the one-byte write after ftruncate that makes tmpfs allocate
    # the object's pages, which fails when /dev/shm is full). torch 2.x's MapAllocator.cpp reserves
    # the pages with posix_fallocate first: "unable to allocate shared memory(shm) for file <%s>:
    # %s (%d)", ENOSPC where /dev/shm is full (a real run under an 8 MiB /dev/shm,
    # tests/fixtures/logs/torchrun-cpu/shm)
    _p(EventKind.SHM_ERROR, ("NCCL WARN", _LAST, "Error while creating shared", "bus error", "Bus error",
                     "Error: unable to write to file", "Error: unable to mmap",
                     "unable to allocate shared memory"),
       r"(?P<detail>(?:misc/)?shmutils\.cc[^\n]*|Error while creating shared memory segment[^\n]*"
       r"|failed to extend /dev/shm[^\n]*|insufficient shared memory[^\n]*"
       r"|out of shared memory[^\n]*|(?:/dev/shm|</torch_)[^\n]*No space left on device[^\n]*"
       r"|unable to mmap \d+ bytes from file </torch_[^\n]*Cannot allocate memory[^\n]*"
       r"|unable to write to file </torch_[^>\n]*>(?!:)[^\n]*)",
       claims=True),
    # (NCCL's init.cc: "Duplicate GPU detected : rank %d and rank %d both on CUDA device %x";
    # a paste or a terminal may cut it after the ranks, which say it whole)
    _p(EventKind.DUPLICATE_GPU, ("NCCL WARN", _LAST, "Duplicate GPU detected"),
       r"Duplicate GPU detected ?: rank (?P<rank_a>\d+) and rank (?P<rank_b>\d+)(?: both on CUDA "
       r"device (?P<device>\w+))?", claims=True),
    _p(EventKind.ROOT_MISMATCH, ("NCCL WARN", _LAST),
       r"Bootstrap Root ?: (?P<detail>(?:mismatch in rank count|rank \d+ of \d+ ranks has "
       r"already checked in)[^\n]*)", claims=True),
    # (and oneCCL's Level Zero call failing to open another GPU's memory: "ze error at
    # zeMemOpenIpcHandle, code: ZE_RESULT_..." (oneCCL's ze_call.cpp, do_call); Level Zero's
    # zeMemOpenIpcHandle maps a peer process's device memory, the counterpart of CUDA's
    # cudaIpcOpenMemHandle)
    _p(EventKind.P2P_ERROR, ("NCCL WARN", _LAST, "CUDA error", "ze error at"),
       r"(?P<detail>transport/p2p\.cc[^\n]*|Cuda failure '[^']*peer[^']*'[^\n]*"
       r"|peer access is not supported[^\n]*|failed to open CUDA IPC handle[^\n]*"
       r"|cudaIpc\w+[^\n]*(?:fail|error)[^\n]*"
       r"|ze error at zeMemOpenIpcHandle[^\n]*)", claims=True),
    # (vLLM's cumem allocator: "CUDA Error: %s at %s:%d", the driver's text for its error)
    # (c10's alloc_cpu.cpp: "DefaultCPUAllocator: can't allocate memory: you tried to allocate %d
    # bytes. Error code %d (%s)" and, torch 1.x to 2.x, "DefaultCPUAllocator: not enough memory:
    # you tried to allocate %d bytes.": the host's memory)
    # (c10/cuda/CUDACachingAllocator.cpp's own words after "CUDA out of memory. ", which also
    # stand alone where a terminal wrapped the line before them: to torch 2.0 "Tried to allocate
    # %s (GPU %d; %s total capacity; ...", from 2.1 "Tried to allocate %s. GPU %d has a total
    # capacity of %s of which ...", the sizes in format_size's "%.2f MiB" or "%d bytes")
    # (the other accelerators' builds of that allocator print its words with their device's
    # name: ROCm's hipified "HIP out of memory.", torch's XPU "XPU out of memory.", Ascend's
    # torch_npu "NPU out of memory.", MPS's "MPS backend out of memory"; and Ascend's runtime
    # gives its driver's reason as "[driver error:out of memory]")
    _p(EventKind.OOM, ("CUDA out of memory", "OutOfMemoryError", "CUDA error", "NCCL WARN",
               "can't allocate memory", "Out of memory", "MemoryError", "CUDA Error",
               "not enough memory", "Tried to allocate", "out of memory",
               *CGROUP_OOM_WORDS),  # (Slurm's and Kubernetes' memory cgroup: below)
       r"(?P<detail>CUDA out of memory[^\n]*|(?:[\w.]*)OutOfMemoryError[^\n]*"
       r"|\b(?:HIP|XPU|NPU|MPS backend) out of memory[^\n]*|driver error: ?out of memory[^\n]*"
       r"|Tried to allocate [\d.]+ (?:bytes|[KMGT]iB)(?: \(GPU \d+; [\d.]+ (?:bytes|[KMGT]iB) "
       r"total capacity|\. GPU \d+ has a total capacity of)[^\n]*"
       r"|CUDA [Ee]rror: out of memory|Cuda failure 'out of memory'"
       r"|DefaultCPUAllocator: (?:can't allocate|not enough) memory[^\n]*"
       r"|Out of memory: Kill(?:ed)? process"
       r"[^\n]*|\bMemoryError\b"
       # Slurm: slurmstepd on the step's memory cgroup ("Detected %u oom_kill event(s) in %s.
       # Some of the step tasks have been OOM Killed.", before 21.08 "oom-kill event(s) ...
       # killed by the cgroup out-of-memory handler"; "%s exceeded memory limit (%u > %u), being
       # killed"), and srun on each task it killed ("srun: error: %s: task %s: Out Of Memory")
       r"|\bDetected \d+ oom[-_]kill events?(?:\(s\))?[^\n]*"
       r"|\bexceeded memory limit \(\d+ > \d+\), being killed[^\n]*"
       rf"|{SRUN_TASKS}Out Of Memory\b[^\n]*"
       # Kubernetes' reason for a container the kernel killed at its memory limit (the pod's
       # containerStatuses[].state.terminated.reason, "Reason: OOMKilled" in kubectl describe)
       r"|\bOOMKilled\b[^\n]*)", claims=True),
    _p(EventKind.VERSION_ERROR, ("CUDA error", "NCCL WARN", "driver version is insufficient"),
       r"(?P<detail>CUDA driver version is insufficient for CUDA runtime version)", claims=True),
    _p(EventKind.NO_INTERFACE, ("NCCL WARN", _LAST, "Error: "),
       r"(?P<detail>(?:Bootstrap|NET/Socket) ?: no (?:socket )?interface found|Unable to find "
       r"address for:? ?(?P<name>\S*))", claims=True),
    _p(EventKind.PORT_IN_USE, ("rror", "onnect", "already in use"),
       r"(?P<detail>Address already in use|EADDRINUSE|address already in use|errno: 98"
       rf"|{winsock_code('EADDRINUSE')}[^\n]*)",  # (Windows Sockets' WSAEADDRINUSE)
       r"port: (?P<port>\d+)", rf":(?P<port>\d+) \((?:errno: 98|{winsock_code('EADDRINUSE')})",
       claims=True),
    # --- the old local-rank argument contract (torch.distributed.launch vs the script) ---
    # (argparse's "%(prog)s: error: ..."; a thread's copy may drop the program's name and turn
    # "--" into a dash, the typographer's en or em dash)
    _p(EventKind.LOCAL_RANK_ARG, ("rror: unrecognized arguments:",),
       r"(?:(?P<script>[^\s:]{1,256}): )?[Ee]rror: unrecognized arguments: (?:\S+ )*?"
       r"(?P<flag>(?:--|\u2013|\u2014)local[-_]rank)(?:[= ](?P<value>-?\d+))?", claims=True),
    _p(EventKind.LOCAL_RANK_ARG, ("error: the following arguments are required:",),
       r"(?P<script>[^\s:]{1,256}): error: the following arguments are required: [^\n]*?"
       r"(?P<flag>--local[-_]rank)", fixed=(("required", "1"),), claims=True),
    _p(EventKind.DEVICE_ORDINAL,
       ("error: invalid device ordinal", "Error: Device index must not be negative"),
       r"(?P<detail>invalid device ordinal|Device index must not be negative)"),
    _p(EventKind.LOCAL_RANK_MINUS_ONE, ("local_rank=-1", "local_rank: -1", "local_rank': -1",
                                "set_device(-1)"),
       r"(?P<detail>local_rank(?:=|: |': )-1\b|set_device\(-1\))"),
    # --- watchdog and collective timeouts ---
    # (torch 1.11 put "SeqNum=N, " first in WorkNCCL's operator<<; 1.8-1.10 began at OpType)
    _p(EventKind.WATCHDOG, ("WorkNCCL(",),
       r"Rank (?P<rank>\d+)\] Watchdog caught collective operation timeout: WorkNCCL\("
       r"(?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>\w+)",
       r"Timeout\(ms\)=(?P<timeout_ms>\d+)", r"ran for (?P<ran_ms>\d+) milliseconds",
       claims=True),
    # Only the watchdog's stack frames: a collective timed out, rank and op unknown.
    # (also the frame as a thread's copy gives it, "checkTimeout at ProcessGroupNCCL.cpp:733";
    # the watchdog's words without its "[Rank N]" head or its WorkNCCL, and a WorkNCCL a
    # timeout is said of in other words, "NCCL collective timeout: WorkNCCL(SeqNum=16, ...)")
    _p(EventKind.WATCHDOG_FRAME, ("checkTimeout",),
       r"(?P<detail>WorkNCCL::checkTimeout|Exception raised from checkTimeout"
       r"|\bcheckTimeout at [\w/.-]{0,256}?ProcessGroupNCCL\.cpp:\d+)"),
    _fb(EventKind.WATCHDOG_FRAME, ("Watchdog caught", "WorkNCCL("),
        r"(?P<detail>Watchdog caught collective operation timeout[^\n]*"
        r"|(?i:timeout|timed out)[^\n]*WorkNCCL\((?:SeqNum=\d+, )?OpType=\w+[^\n]*)"),
    _p(EventKind.WORK_PROGRESS, ("Timeout at NCCL work",),
       r"Rank (?P<rank>\d+)\] Timeout at NCCL work: (?P<seq>\d+), last enqueued NCCL work: "
       r"(?P<enqueued>-?\d+), last completed NCCL work: (?P<completed>-?\d+)", claims=True),
    # (Gloo's tcp UnboundBuffer, on an operation's timeout, first closes every pair of its
    # context with "Application timeout caused pair closure", which the other pending operations
    # raise, then throws "Timed out waiting %dms for %s operation to complete")
    _p(EventKind.GLOO_TIMEOUT, ("rror",),
       r"Timed out waiting (?P<ms>\d+) ?ms for (?P<op>\w+) operation"
       r"|Error: Application timeout caused pair closure", claims=True),
    _p(EventKind.BARRIER_FAILED, ("Error: ",),
       r"Ranks? (?P<ranks>\d+(?:, ?\d+)*) failed to pass monitoredBarrier in (?P<ms>\d+) ms",
       claims=True),
    # --- rendezvous ---
    _p(EventKind.RDZV_TIMEOUT, ("rror",),
       r"(?P<detail>RendezvousTimeoutError[^\n]*|Timed out after \d+ seconds waiting for "
       r"clients\. (?P<joined>\d+)/(?P<total>\d+) clients joined|Timed out initializing process "
       r"group in store based barrier[^\n]*)",
       r"world_size=(?P<total>\d+), num_workers_joined=(?P<joined>\d+)", claims=True),
    _p(EventKind.RDZV_CONFIG, ("Error: ", "RendezvousClosedError", "RendezvousStateError"),
       r"(?P<detail>The (?:port number|hostname) of the rendezvous endpoint[^\n]*"
       r"|Error initializing torch\.distributed using \S+ rendezvous: [^\n]*"
       r"|nnodes=\S+ is not in \"MIN:MAX\" format|Port is absent in endpoint[^\n]*"
       r"|RendezvousClosedError|RendezvousStateError[^\n]*|The rendezvous configuration[^\n]*)",
       claims=True),
    # (torchelastic's c10d rendezvous backend, c10d_rendezvous_backend.py: "The connection to
    # the C10d store has failed. See inner exception for details.", posted without its class)
    _p(EventKind.RDZV_CONNECTION, ("RendezvousConnectionError", "connection to the C10d store"),
       r"(?P<detail>RendezvousConnectionError[^\n]*|The connection to the C10d store has "
       r"failed[^\n]*)", claims=True),
    _p(EventKind.RESOLVE_FAILED, ("gai error", "gaierror", "rror"),
       r"(?P<detail>Name or service not known|Temporary failure in name resolution)",
       r"of \((?P<host>[^,()\s]+), (?P<port>\d+)\) cannot be retrieved", claims=True),
    # --- connections: specific shapes first, the bare error words last ---
    # (socket.cpp formats a std::chrono duration with fmt, which writes its unit: "60s", and
    # "1800000ms" where the duration is in milliseconds)
    _p(EventKind.CONNECT_ERROR, ("onnect",),
       r"The client socket has timed out after (?P<after>\d+m?s) while trying to connect to "
       r"\((?P<addr>[^,()]+), (?P<port>\d+)\)", fixed=(("err", "timed out"), ("source", "c10d")),
       claims=True),
    # (torch 1.9 to 1.12's TCPStore client, c10d's Utils.cpp tcputils::connect, naming no
    # endpoint: "connect() timed out. Original timeout was %d ms.")
    _p(EventKind.CONNECT_ERROR, ("onnect",),
       r"connect\(\) timed out\. Original timeout was (?P<after>\d+ ?ms)",
       fixed=(("err", "timed out"), ("source", "c10d")), claims=True),
    _p(EventKind.CONNECT_ERROR, ("onnect",),
       r"The client socket has failed to connect to (?:any network address of )?[\[(]" + _ADDR
       + r"[\]]?[:,] ?(?P<port>\d+)\)?(?:[^\n]*?(?:errno: \d+ - |(?=system error: ))"
       r"(?P<err>[^)]+)\))?",  # (Windows: "(system error: 10061 - No connection could ...)")
       fixed=(("source", "c10d"),), claims=True),
    # c10d's own log of a dial refused before its next try (socket.cpp, SocketConnectOp::tryConnect
    # on ECONNREFUSED, torch 2.2 on, at info level: "No socket on (%s, %d) is listening yet, will
    # retry.")
    _p(EventKind.CONNECT_ERROR, ("is listening yet",),
       r"No socket on \((?P<addr>[^,()]+), (?P<port>\d+)\) is listening yet",
       fixed=(("err", "Connection refused"), ("source", "c10d")), claims=True),
    # (Gloo prints a port in network byte order, 40223 as 8093: measured in the sim, a listening
    # rank's `ss -ltn` against the remote= its peer printed. Its number is not the port, so
    # Gloo's lines give none)
    _p(EventKind.CONNECT_ERROR, _CONNECT_ERRORS,
       r"SO_ERROR: (?P<err>[^,]+), remote=\[" + _ADDR + r"\](?::\d+)?",
       fixed=(("source", "gloo"),), claims=True),
    # (a thread's copy may elide the port: "connect to 169.254.170.23<...> returned ...")
    _p(EventKind.CONNECT_ERROR, _CONNECT_ERRORS,
       r"[Cc]onnect to " + _ADDR + r"<(?:(?P<port>\d+)|\.\.\.)> (?:failed ?: ?|returned )"
       r"(?P<err>[A-Za-z][^,\n(]*)", fixed=(("source", "nccl"),), claims=True),
    _p(EventKind.CONNECT_ERROR, _CONNECT_ERRORS,
       r"[Cc]onnect returned (?P<err>[A-Za-z][A-Za-z ]*?)(?:,|\.|\(|$)",
       fixed=(("source", "nccl"),), claims=True),
    _p(EventKind.CONNECT_ERROR, _CONNECT_ERRORS,
       r"connect \[" + _ADDR + r"\]:\d+: (?P<err>[A-Z][A-Za-z ]+)",
       fixed=(("source", "gloo"),), claims=True),
    _p(EventKind.CONNECTION_LOST, _LOST,
       r"(?P<detail>Connection reset by peer|Connection closed by (?:remote )?peer|Broken pipe"
       r"|remote process exited or there was a network error|ECONNRESET"
       # strerror(ENOTCONN), a send or receive on a connection that is gone (Gloo's pair throws
       # it as std::system_error)
       r"|Transport endpoint is not connected"
       # Windows Sockets' WSAECONNRESET (10054), in the system's language or its English words
       rf"|{winsock_code('ECONNRESET')}|An existing connection was forcibly closed)",
       # (c10d's SocketImpl names its own end first, "addr=[...]:N, remote=[...]:M": the peer is
       # the remote one)
       r"(?<!addr=)\[(?P<addr>[^\]\s]+)\]:(?P<port>\d+)", r"peer (?P<addr>[^\s<]+)<(?P<port>\d+)>",
       claims=True),
    # torch.distributed.rpc's TensorPipe agent on a pipe that broke (torch/csrc/distributed/rpc/
    # tensorpipe_agent.cpp: "RPC agent for %s encountered error when <what it did> <to|from> %s:
    # %s", the peer's worker name, then TensorPipe's error): TensorPipe's EOFError ("eof") is
    # the peer's end closed under it, its process gone; its SystemErrors carry strerror's words,
    # which the pattern above reads
    _p(EventKind.CONNECTION_LOST, _LOST,
       r"RPC agent for [^\s:]{1,255} (?P<detail>encountered error when [a-z #\d]{1,60}? "
       r"(?:to|from) [^\s:]{1,255}: eof)\b", claims=True),
    _p(EventKind.CONNECT_ERROR, _CONNECT_ERRORS,
       r"(?P<err>Connection refused|Connection timed out|No route to host|Network is unreachable"
       r"|Host is unreachable|ECONNREFUSED|ETIMEDOUT)",
       r"remote=\[" + _ADDR + r"\]", claims=True),
    # --- torchrun's error summary (multi-line, or flattened into one line) ---
    _p(EventKind.SUMMARY_ROOT, _ROOT, r"Root Cause \(first observed failure\)", multi=True),
    _p(EventKind.SUMMARY_FAILURES, ("ChildFailedError",), r"(?<![\w-])Failures:", multi=True),
    _p(EventKind.SUMMARY_HOST, _ROOT, r"\bhost\s*:\s*(?P<host>[^\s\]]+)", multi=True),
    _p(EventKind.SUMMARY_RANK, ("_rank:",) + _ROOT,
       r"(?<!local_)\brank\s*:\s*(?P<rank>-?\d+) \(local_rank: (?P<local_rank>\d+)\)", multi=True),
    _p(EventKind.SUMMARY_EXIT, _ROOT, r"exitcode\s*:\s*(?P<code>-?\d+) \(pid: (?P<pid>\d+)\)", multi=True),
    _p(EventKind.SUMMARY_SIGNAL, _ROOT,
       r"Signal (?P<signum>\d+) \((?P<signal>SIG\w+)\) received by PID (?P<pid>\d+)", multi=True),
    # (elastic/multiprocessing/api.py: "failed (exitcode: %d) local_rank: %d (pid: %d) of binary:
    # %s"; a paste may stop after the local rank)
    _p(EventKind.AGENT_FAILED, ("_rank:",),
       r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local_rank>\d+)(?: \(pid: "
       r"(?P<pid>\d+)\))?", claims=True),
    _p(EventKind.CHILD_FAILED, ("ChildFailedError",), r"(?P<detail>ChildFailedError)"),
    # the MPI launchers' and Horovod's report of the first process that exited non-zero
    # (end_lines.FIRST_FAILED_*): its head opens a root section of the log, as torchrun's "Root
    # Cause" does; its name and code, on the lines FOLLOW reads, fill the section's record; a
    # failure line too, where a paste stops before its name and code
    _p(EventKind.SUMMARY_ROOT, (FIRST_FAILED_HEAD,), re.escape(FIRST_FAILED_HEAD)),
    _p(EventKind.FAILURE_LINE, (FIRST_FAILED_HEAD,),
       rf"(?P<detail>{re.escape(FIRST_FAILED_HEAD)}[^\n]{{0,200}})"),
    _p(EventKind.SUMMARY_RANK, (), FIRST_FAILED_NAME),
    _p(EventKind.SUMMARY_EXIT, (), FIRST_FAILED_CODE),
    # Open MPI's launcher on a rank a signal ended (end_lines.OPEN_MPI_SIGNALED)
    _p(EventKind.MPI_RANK_SIGNALED, ("exited on signal",), OPEN_MPI_SIGNALED, claims=True),
    # --- failures no rule may name (read by rules/unexplained.py; never claim) ---
    # torchrun/the elastic agent was told to stop (a scheduler, a user, ddpkit's own teardown)
    _p(EventKind.DEATH_SIGNAL, ("death signal",), r"Received (?P<signal>\S+) death signal"),
    # DeepSpeed's launcher told to stop (launcher/launch.py, sigkill_handler, since 0.3.x: with no
    # process ended before, logger.info(f"Main process received {sig_names[signum]}, exiting"),
    # SIGINT or SIGTERM)
    _p(EventKind.DEATH_SIGNAL, ("Main process received",),
       r"Main process received (?P<signal>SIGINT|SIGTERM), exiting"),
    _p(EventKind.DEATH_SIGNAL, ("rror",),
       r"(?P<detail>\*\*\* (?:JOB|STEP) [\w.]+ ON \S+ CANCELLED AT \S+(?: DUE TO [A-Z ]+)?)"),
    # NCCL's own failure lines when nothing more specific matched.
    _p(EventKind.NCCL_WARN, ("NCCL WARN",), r"NCCL WARN (?P<detail>[^\n]*)", claims=True,
       skip_if=("Failed to open libibverbs", "NET/IB : No device found")),
    # Facts the causes read (doctor/log/causes/, from doctor/log/facts/): the line is an event
    # so that its facts are read; nothing reads its kind.
    # oneCCL's warning that no launcher variable gave it the local rank and size (its
    # "|CCL_WARN| could not get local_idx/count from environment variables, ..."), read with the
    # failure it leads to (causes/ccl_local_rank.py)
    _p(EventKind.JOB_FACT, ("local_idx/count",),
       r"(?P<detail>could not get local_idx/count from environment variables)"),
    _p(EventKind.JOB_FACT, ("based barrier", "will restart", "file://", "master_addr",
                            "MASTER_ADDR", "master-addr", "num_local_procs"),
       r"(?P<detail>nnodes|min_nodes|max_nodes|group_world_size|rdzv[_-]endpoint|based barrier"
       r"|restart|master_addr|MASTER_ADDR|master-addr|file://)"),
    # --- where a run ends (rules/run_end.py): doctor/log/end_lines.py ---
    *END_PATTERNS,
    # --- last: failure lines no pattern above read (rules/unexplained.py) ---
    # a CUDA error's own text (cudaGetErrorString's), whatever check printed it
    _fb(EventKind.FAILURE_LINE, CUDA_DISTINCT_ERRORS,
        "(?m)^(?P<detail>[^\n]*(?:" + "|".join(re.escape(t) for t in CUDA_DISTINCT_ERRORS)
        + ")[^\n]*)"),
    _fb(EventKind.FAILURE_LINE, ("rror",), r"(?P<detail>\[Errno -?\d+\][^\n]*|\berrno:? ?-?[1-9]\d*)"),
    # other error lines: glog's "Check failed: ... unhandled cuda error", "prog: error: ...",
    # the HIP runtime's "hipErrorNoBinaryForGpu: Unable to find code object ..."
    _fb(EventKind.FAILURE_LINE, ("rror",),
       r"(?P<detail>(?:Check failed:|\bunhandled \w+ error\b|(?:^|[\]:] ?)error: "
       r"|\bhipError[A-Z]\w+: )[^\n]*)",
       skip_if=("NCCL INFO",)),
    # the error and higher levels of Python's logging (its default format "%(levelname)s:%(name)s:
    # %(message)s", "[ERROR]", " - CRITICAL - ") and of other loggers ("FATAL:")
    _fb(EventKind.FAILURE_LINE, ("ERROR", "CRITICAL", "FATAL"),
        r"(?P<detail>(?:^|[\s\]:[])(?:ERROR|CRITICAL|FATAL)[:\]\s][^\n]*)"),
    # a program's own NCCL check ("NCCL Error at %s:%d value %d", FastMoE; "NCCL ERROR ...")
    _fb(EventKind.FAILURE_LINE, ("NCCL Error", "NCCL ERROR"),
        r"(?P<detail>\bNCCL (?:Error|ERROR)\b[^\n]*)", skip_if=("NCCL INFO",)),
    # oneCCL's (Intel's collectives, torch's ccl backend on XPU) error level: "|CCL_ERROR| ..."
    _fb(EventKind.FAILURE_LINE, ("CCL_ERROR|",), r"\|CCL_ERROR\|\s*(?P<detail>[^\n]*)"),
    # c10d's own error-level lines (c10d/logging.h: "[E socket.cpp:472] [c10d] ...", from torch
    # 2.2 "[E1204 09:50:12.118000 123 torch/csrc/distributed/c10d/socket.cpp:462] [c10d] ...")
    _fb(EventKind.FAILURE_LINE, ("failed to listen",),
        glog_header("E") + r" \[c10d\] (?P<detail>[^\n]*)"),
    # torch's C++ error-level lines (c10/util/Logging.cpp, LOG(ERROR), glog's header: "[E
    # ProcessGroupGloo.cpp:138] Rank 0 successfully reached monitoredBarrier, but received errors
    # ...", from torch 2.2 "[E1204 09:50:12.118000 123 torch/csrc/distributed/c10d/...cpp:462]");
    # the store closing under a client at the run's end is no failure (torch_log.HARMLESS)
    _fb(EventKind.FAILURE_LINE, ("cpp:",),
        rf"^{LINE_PREFIXES}\s*" + glog_header("E", source=r"[\w.+-]+\.cpp")
        + r" (?P<detail>\S[^\n]*)",
        skip_if=("recvValue", "Store is down", "error set by ProcessGroupNCCL: Process Group shutdown")),
    # torch.distributed.elastic's own error-level lines ("E1204 09:37:01.823000 27542
    # torch/distributed/elastic/agent/server/api.py:1009] Error waiting on exit barrier. ...")
    _fb(EventKind.FAILURE_LINE, ("rror",),
        "^" + glog_header("E", source=r"[\w.+-]+\.py", timed=True)
        + r" (?P<detail>[^\n]*[Ee]rror[^\n]*)"),
    _fb(EventKind.FAILURE_LINE, ("core dumped", "terminate called", "Fatal Python error"),
       r"(?P<detail>(?:Segmentation fault|core dumped|" + TERMINATE + r"|"
       + "|".join(TERMINATE_OTHER) + r"|"
       r"Fatal Python error)[^\n]*)"),
    _fb(EventKind.FAILURE_LINE, (), r"(?P<detail>\bwhat\(\): +\S[^\n]*)"),  # after "terminate called"
    _fb(EventKind.FAILURE_LINE, ("exit code",), r"(?P<detail>\bexit code[ :=]*(?P<code>-?[1-9]\d*))"),
    # DeepSpeed's launcher after a worker exited non-zero (launcher/launch.py, sigkill_handler:
    # logger.error(f"{cmd} exits with return code = {last_return_code}"), its format's level
    # "[ERROR]" on the line); a negative code is a signal, read as a fact (cause_lines.py)
    _fb(EventKind.FAILURE_LINE, ("ERROR",),
        r"(?P<detail>\bexits with return code = (?P<code>[1-9]\d*))"),
    # MPICH's (and Intel MPI's) hydra on a process that ended badly (pm/pmiserv: "BAD TERMINATION
    # OF ONE OF YOUR APPLICATION PROCESSES"; ui/mpich/mpiexec.c: "YOUR APPLICATION TERMINATED
    # WITH THE EXIT STRING: %s (signal %d)", "APPLICATION TERMINATED ..." in older releases), no
    # error word on either; the signal is a fact (facts/extract.py's deaths)
    _fb(EventKind.FAILURE_LINE, ("BAD TERMINATION", "TERMINATED WITH THE EXIT STRING"),
        r"(?P<detail>\bBAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\b"
        r"|\bAPPLICATION TERMINATED WITH THE EXIT STRING: [^\n]*)"),
    _fb(EventKind.FAILURE_LINE, ("entire process down",),
        r"^(?P<detail>[^\n]*entire process down[^\n]*)"),
    _fb(EventKind.FAILURE_LINE, ("abandoning",),
        r"(?P<detail>Process \d+ did not exit after \w+ within [^\n]*abandoning[^\n]*)"),
    # the lines read for the causes' facts (doctor/log/cause_lines.py), last
    *CAUSE_PATTERNS,
)


def trigger_strings() -> tuple[str, ...]:
    """Every trigger literal, sorted."""
    found = {t for p in PATTERNS for t in p.triggers} | set(FOLLOW)
    return tuple(sorted(found))
