"""The anchors: the words the scan's one Aho-Corasick pass looks for (doctor/log/anchors.py) to
mark the lines worth reading, each a literal or a regex that starts with one (its key). Every
trigger of a line pattern (doctor/log/patterns.py) matches an anchor of the main pass or of the
tail pass (a unit test checks), so no line a pattern can read is missed. The tail pass's anchors
are literals, looked for as they are."""

from __future__ import annotations

import re

from ddpkit.doctor.log.end_lines import (
    CGROUP_OOM_WORDS,
    FATAL_SIGNALS,
    FIRST_FAILED_HEAD,
    GLIBC_ABORTS,
)
from ddpkit.doctor.log.facts.kinds import CUDA_DISTINCT_ERRORS, CUDA_UNLOADED
from ddpkit.launch.torchrun.tracebacks import IGNORED_HEAD


def _literal(text: str) -> bytes:
    """``text`` as an anchor that matches it literally: its regex characters escaped, its spaces
    kept as they are (an anchor's key is the literal its regex starts with, so an escaped space
    would cut the key short and slow the scan)."""
    return re.sub(r"([()\[\]{}.*+?^$|\\])", r"\\\1", text).encode()


ANCHORS: tuple[bytes, ...] = (
    rb"NCCL(?: (?:INFO (?:Bootstrap|bootstrap\.cc|NET/|Using network|Using internal|Plugin Path"
    rb"|NCCL_|Failed to open|comm 0x|ncclCommInit|Trees)|WARN|version|error|failure|work)|\()",
    b"rror", b"onnect", b"emory", b"Root Cause", b"_rank:",
    rb"local_rank(?:=|': )-1", rb"_device\(",  # (set_device(-1), a rank selecting its GPU)
    # failures that real logs post bare, without an NCCL or error word on their line
    # (Gloo's "Unable to resolve hostname", OpenSSH's "Could not resolve hostname")
    b"Duplicate GPU", b"driver version is insufficient", b"resolve hostname",
    b"is listening yet",  # (c10d's info line of a refused dial it retries)
    # (whatever check printed them; their regex characters escaped, their spaces kept literal)
    *(_literal(text) for text in CUDA_DISTINCT_ERRORS),
    # NCCL's line for a connection over the net transport, without NCCL's prefix where a paste
    # dropped it ("9[1a000] -> 2[6b000] [send] via NET/IB/0/GDRDMA", causes/gdr_one_side.py)
    b" via NET/",
    # Envoy's cluster for an intercepted port of its pod (causes/service_mesh.py)
    _literal("inbound|"),
    b"Tried to allocate",  # (the GPU allocator's words, where a terminal cut "out of memory")
    # (Slurm's and Kubernetes' memory cgroup on the tasks it killed; "emory" marks the others)
    *(_literal(text) for text in CGROUP_OOM_WORDS if "emory" not in text),
    b"file://",  # (a FileStore's init_method, in a traceback's source line or printed arguments)
    b"master_addr", b"MASTER_ADDR", b"master-addr",  # (the master address a launcher was given)
    b"num_local_procs",  # (DeepSpeed's launcher stating its node rank)
    b"local_idx/count",  # (oneCCL finding no local rank and size)
    b"is killed by signal",  # torch's DataLoader on a worker a signal killed ("Killed.": no error)
    b"/dev/shm has only",  # Ray finding /dev/shm smaller than its object store (a warning)
    b"device_count()", b"is_available()",  # a traceback's assert on the GPUs torch sees
    b"GLOBAL_RANK: ",  # PyTorch Lightning's line for each process joining (a rank's claim)
    b"INFO NET/Socket",  # also the quoted or pre-2.4 form without the NCCL word
    b"checkTimeout",  # the NCCL watchdog's stack, posted without its message line
    b"Watchdog caught",  # and its message without its "[Rank N]" head or its WorkNCCL
    b"Ring ",  # pre-2.5 ring lines (before 2.4 also without the NCCL word)
    b"PyTorch", b"torch==",  # collect_env / pip: the torch build a node runs; torch saying its
    # build does not fit the GPU or the driver (causes/gpu_build.py)
    b"Using devices",  # nccl-tests' table of the host each rank runs on follows this line
    # failures no rule may name (issue 24): a traceback, errno, a fatal signal, an exit code,
    # and the launcher or scheduler stopping the job
    # (tracebacks, errno, "Fatal Python error: Segmentation fault" and slurm's "error: *** JOB
    # ... CANCELLED" carry "rror", the shell's "Segmentation fault (core dumped)" its "core
    # dumped"; every line an anchor marks is tried against patterns, so an anchor is a word that
    # failures print and progress lines do not)
    b"ERROR", b"CRITICAL", b"FATAL", b"core dumped", b"terminate called",
    b"cpp:",  # torch's C++ log records (glog's header "[E ProcessGroupGloo.cpp:138]"): their level
    IGNORED_HEAD.encode(),  # CPython's report of an exception it ignores (rules/ignored.py)
    CUDA_UNLOADED.encode(),  # CUDA unloaded at the process's exit; its check's words vary
    # an exception whose type ends in Exception, printed as Python prints it ("<type>: <msg>",
    # DeepSpeed's "deepspeed.runtime.zero.utils.ZeRORuntimeException: ..."), no error word in it;
    # or raised without a message, its type alone on the line (prefixes.BARE_RAISED)
    b"Exception",
    b"exit code", b"death signal", b"Main process received",
    # ProcessGroupNCCL's watchdog aborting the process (its template in ProcessGroupNCCL.cpp,
    # torch 1.10 on: "... To avoid data inconsistency, we are taking the entire process down."),
    # posted without an error word
    b"entire process down",
    # Open MPI's launcher reporting a rank a signal ended ("... exited on signal 9 (Killed).")
    b"exited on signal",
    # MPICH's hydra on a process that ended badly, and the signal that ended it
    b"BAD TERMINATION", b"TERMINATED WITH THE EXIT STRING",
    # (the MPI launchers' and Horovod's runner's report of the first process that failed, named
    # on the next lines: end_lines.FIRST_FAILED_HEAD)
    FIRST_FAILED_HEAD.encode(),
    # torchrun's teardown giving up on a worker that survived SIGKILL (elastic/multiprocessing/
    # api.py, an error-level line without an error word)
    b"abandoning",
    # facts a cause reads (doctor/log/causes/): a port
    # in use (c10d's bind warning "(errno: 98 - Address already in use)", libuv's "message:
    # address already in use"; the error-level line after it is followed), torchrun's launch
    # configs and each rendezvous' result (their lines followed: node counts, the endpoint,
    # master_addr, restart_count), the agent restarting its workers, a store-based barrier
    b"already in use", b"elastic_operator", b"Rendezvous complete", b"will restart",
    # (with c10d's bind warning of each address it tried, "The server socket has failed to bind
    # to 10.0.0.9:29500 (errno: 99 - Cannot assign requested address).", causes/store_address.py:
    # one pass for both)
    b"based barrier", rb"failed to (?:listen|bind)",
    # Open MPI's TCP transport's "received unexpected process identifier" (btl_tcp_endpoint.c),
    # posted bare (its other messages carry "onnect")
    b"process identifier",
    # nccl-tests' CUDACHECK, "Test CUDA failure common.cu:1045 'invalid argument'": the CUDA
    # error's text may carry no error word
    b"CUDA failure",
    # NCCL failing to bind NVLink SHARP's multicast memory (causes/nvls_bind.py)
    b"NVLS",
    # DeepSpeed's op builder's CUDA check, raised as CUDAMismatchException or Exception
    b"torch was compiled with",
    # torch.compile's backend failing (torch/_dynamo/exc.py, BackendCompilerFailed, v2.1 on:
    # "backend='compile_fn' raised:", its exception on the next line; posted without its class)
    b"raised:",
    # nvcc refusing the GPU's architecture ("nvcc fatal   : Unsupported gpu architecture ..."),
    # which carries no error word
    b"Unsupported gpu architecture",
    # MPICH's mpiexec (Hydra) refusing an option: "match_arg (./utils/args/args.c:160):
    # unrecognized argument noprefix" carries no error word (causes/mpi_launcher_arguments.py)
    b"unrecognized argument ",
    # a Python traceback's frames: the one printed last before an exception is where it was
    # raised (causes/raise_site.py)
    b'File "',
    # py-spy's text dump: a line per thread, its status in brackets; its frames on the lines after
    # it are followed (patterns.FOLLOW; causes/pyspy_dump.py)
    rb"active(?:\+gil)?\)", rb"idle\)",
)
# Where a run ends (rules/run_end.py): the end markers a finished run prints (torchrun's agent,
# ddpkit's summary, nccl-tests' last line) and the shell's report of a SIGKILL. They are looked
# for in the last TAIL_BYTES of each log only, where a run's end is (a killed rank's peers react
# within seconds): their words ("finished", "Killed", "SIG") also fill a run's progress lines.
TAIL_ANCHORS: tuple[bytes, ...] = (b"SUCCEEDED", b"finished", b"Avg bus bandwidth", b"Killed",
                                   b"Destroy COMPLETE", b"Trainer.fit` stopped",
                                   b"Training completed.", b"Process received signal",
                                   # ProcessGroupNCCL's destructor, at exit (two wordings)
                                   b"NOT been destroyed", b"was not called before program exit",
                                   *(s.encode() for s in FATAL_SIGNALS),
                                   # zsh's report of a job a signal ended, glibc's of a heap or
                                   # stack it found corrupt before it aborts
                                   b"zsh: ", *(s.encode() for s in GLIBC_ABORTS),
                                   # a process reported dead of a signal, posted without an
                                   # error word on its line (DeepSpeed's launcher's "exits with
                                   # return code = -9" wrapped apart from its "[ERROR]",
                                   # torchelastic's "Signal 9 (SIGKILL) received by PID" without
                                   # its summary's head, torch.multiprocessing's "terminated
                                   # with signal SIGBUS"): where a job ends, read for its facts
                                   b"return code", b"SIG",
                                   # DDP's checks posted without their exception's line: the
                                   # reducer's list of parameters without a gradient, the
                                   # constructor's refusal of a module on the CPU (facts'
                                   # TORCH_CHECKS, causes/ddp_checks.py)
                                   b"did not receive grad", b"DistributedDataParallel device_ids")
TAIL_KINDS = frozenset({"run-complete", "killed", "fatal-signal"})  # only the tail pass's events
TAIL_BYTES = 2 << 20
