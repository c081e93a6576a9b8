"""The kinds of fact, as enums: what a line states, independent of the message that states it.
(An address's class, :class:`AddressClass`, is doctor.addresses', where the network rules
read it too.)"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ddpkit.doctor.addresses import AddressClass


class FactKind(enum.Enum):
    ADDRESS = "address"  # value: the address as printed; detail: its AddressClass
    PORT = "port"
    IFNAME_SETTING = "ifname-setting"  # value: the setting; detail: the variable (NCCL_/GLOO_...)
    INTERFACE = "interface"  # an interface a program says it uses (NCCL's "Using lo:...")
    ERRNO = "errno"  # value: the number; detail: its name (EADDRINUSE)
    SIGNAL = "signal"  # value: the name (SIGKILL)
    EXIT_CODE = "exit-code"
    WORLD_SIZE = "world-size"
    # workers a store-based barrier counted (detail: "completed" where the barrier says it is
    # done, "" while it waits)
    WORKER_COUNT = "worker-count"
    NNODES = "nnodes"  # value: the largest node count the line states
    # the master address a launcher was given or reports (DeepSpeed's runner "--master_addr=X",
    # torchrun's launch configs "master_addr : X", an environment's "MASTER_ADDR=X"; value: the
    # address, detail: its AddressClass)
    MASTER_ADDRESS = "master-address"
    VERSION = "version"  # value: the version; detail: whose (nccl, torch, cuda)
    HOSTNAME = "hostname"
    EMPTY_ADDRESS = "empty-address"  # "address  with family N": no address at all
    RDZV_ENDPOINT = "rdzv-endpoint"  # value: the endpoint as given
    RESTART = "restart"  # torchelastic restarting its worker group / re-forming its rendezvous
    # a process reported dead of a signal (value: its name, SIGKILL; detail: its number, or
    # BEFORE_TEARDOWN where the launcher reports it before it stops the others), in a
    # launcher's or the shell's words: exit code -9, "died with <Signals.SIGKILL: 9>", "Killed"
    DEATH = "death"
    # value: the cudaError_t name; detail: cudaGetErrorString's text as printed ("" for a name)
    CUDA_ERROR = "cuda-error"
    # a program says it could not connect to its peer (value: the address as printed, or ""
    # without one; detail: whose words): Ray's head (GCS, or Redis before Ray 2)
    UNREACHED = "unreached"
    # the peer a connect or a name lookup names (value: host or address; detail: the port)
    DIALLED = "dialled"
    GAI_ERROR = "gai-error"  # getaddrinfo's failure (value: its code, -2; detail: EAI_NONAME)
    SHM_PATH = "shm-path"  # a path in /dev/shm a line names (value: the path)
    SHM_AVAILABLE = "shm-available"  # the free space a program found in /dev/shm (value: bytes)
    # an RDMA adapter's driver reporting a failed work completion (value: the provider, mlx5)
    RDMA_ERROR = "rdma-error"
    # torch.distributed built without a backend the job asks for (value: NCCL, MPI, UCC, Gloo)
    BACKEND_MISSING = "backend-missing"
    # Gloo's tcp transport comparing two ranks' addresses of different families (value: the
    # first rank's family number; detail: the other's; Linux: 2 AF_INET, 10 AF_INET6)
    FAMILY_MISMATCH = "family-mismatch"
    # a variable the env:// rendezvous reads, not set (value: its name, MASTER_ADDR)
    UNSET_VARIABLE = "unset-variable"
    # a library refusing a launcher's variables beside a scheduler's (value: a variable it names,
    # RANK; detail: the scheduler, SLURM)
    LAUNCHERS_CONFLICT = "launchers-conflict"
    # a process selecting its GPU (value: the call as printed: set_device, cudaSetDevice, or
    # torch 1.x's torch/csrc/cuda/Module.cpp, whose only check that names an ordinal is
    # THCPModule_setDevice's cudaSetDevice)
    DEVICE_SELECT = "device-select"
    # NCCL rejecting a communicator config attribute whose value is NCCL_CONFIG_UNDEF_INT
    # (INT_MIN), the "undefined" that NCCL 2.17's NCCL_CONFIG_INITIALIZER writes and NCCL 2.14
    # to 2.16 take for an invalid value (value: the attribute, blocking)
    UNDEF_CONFIG = "undef-config"
    # NCCL's result code by ncclGetErrorString's text (value: the ncclResult_t name)
    NCCL_RESULT = "nccl-result"
    # the code in NCCL's return chain, "NCCL INFO <file>:<line> -> <code>", which NCCLCHECK and
    # its kin print at each level a failure returns through (value: the ncclResult_t name,
    # detail: the code)
    NCCL_RETURN = "nccl-return"
    # a process announcing the global rank it took (value: the rank, detail: the world size):
    # PyTorch Lightning's "initializing ddp: GLOBAL_RANK: %d, MEMBER: %d/%d" (1.x) and
    # "Initializing distributed: GLOBAL_RANK: ..." (lightning_fabric, 2.x)
    RANK_CLAIM = "rank-claim"
    # a node's launcher stating the node rank it was given (value: the node rank, detail: the
    # node count): DeepSpeed's launch.py "nnodes=%d, num_local_procs=%d, node_rank=%d"
    NODE_RANK_CLAIM = "node-rank-claim"
    # Open MPI's TCP transports in their own words (value: the help topic or message that
    # printed the line, MPI_TCP_TOPICS' values): opal/mca/btl/tcp's help-mpi-btl-tcp.txt and
    # btl_tcp_endpoint.c, orte/mca/oob/tcp's oob_tcp_connection.c
    MPI_TCP = "mpi-tcp"
    # torch's TCPStore asked for libuv by a build that has none (value: "libuv")
    STORE_WITHOUT_LIBUV = "store-without-libuv"
    # a tensor handed to an NCCL communicator bound to another GPU (value: the communicator's
    # device, cuda:1; detail: the tensor's, "" where its line was not posted): vLLM's
    # PyNcclCommunicator, which SGLang and others copy
    DEVICE_MISMATCH = "device-mismatch"
    # torch.distributed's checks of how a program uses DDP and its groups (value: the check's
    # key in TORCH_CHECKS): the reducer's, the group's backend for a device type
    TORCH_CHECK = "torch-check"
    # ranks issuing different collectives (value: the collectives' OpTypes as printed, "ALLREDUCE
    # / BROADCAST", "" where not shown): ProcessGroupWrapper's check (TORCH_DISTRIBUTED_DEBUG)
    COLLECTIVE_MISMATCH = "collective-mismatch"
    # a program's own check that its ranks did not enter one of its collectives together (value:
    # the collective it names, or "" where it names none)
    RANKS_OUT_OF_STEP = "ranks-out-of-step"
    # an NCCL connection over the net transport (value: "<rank> -> <peer rank>"; detail: its side,
    # "send" or "receive", then "+gdr" where it uses GPUDirect RDMA)
    NET_CONNECTION = "net-connection"
    # a service mesh's sidecar proxy (Envoy) handling the pod's inbound connections on a port
    # (value: the port)
    MESH_INBOUND = "mesh-inbound"
    # a rank whose address Gloo's connect waited for in the store and never got (value: the
    # rank, from the key's last part: printed.GLOO_PEER_KEY)
    UNJOINED_RANK = "unjoined-rank"
    # torchrun's agents waiting in the store for every node's worker info, which timed out
    # (value: how many node ranks it waited for: printed.NODE_ROLE_KEY)
    NODE_INFO_WAIT = "node-info-wait"
    # a torchrun agent of node rank 1 or more waiting in the store for the worker ranks node rank
    # 0's agent hands out, which timed out (value: its own node rank: printed.NODE_ASSIGNED_KEY)
    ASSIGNED_RANKS_WAIT = "assigned-ranks-wait"
    # the ranks meet through a FileStore: a file:// init_method (value: its URL, "file://" alone
    # where the line builds the path)
    FILE_STORE = "file-store"
    # a rank's DataLoader worker killed by a signal, as torch reports it (value: the signal's name,
    # SIGKILL; detail: the worker's pid): causes/loader_worker.py
    LOADER_WORKER_KILLED = "loader-worker-killed"
    # a program's own assertion that torch sees GPUs, as a traceback prints the failing source line
    # ("assert num_gpu <= torch.cuda.device_count()", "assert torch.cuda.is_available()"; value:
    # the call it asserts on, device_count or is_available; detail: the source line)
    GPU_ASSERT = "gpu-assert"
    # autograd's check that a tensor saved for the backward pass is unchanged
    # (torch/csrc/autograd/saved_variable.cpp, SavedVariable::unpack) failing: value: the
    # grad_fn whose output it was ("" where none is printed: a leaf, a parameter or buffer);
    # detail: its sizes as printed ("64", "160, 128")
    IN_PLACE_CHANGE = "in-place-change"
    # a process mp.spawn started that raised (value: its index), its traceback on the next lines
    SPAWNED_FAILED = "spawned-failed"
    # a CUDA check macro's failure line, whatever its error (value: the error's text as the
    # check printed it, "invalid argument"): torch's, NCCL's, vLLM's, THC's, TensorRT-LLM's
    CUDA_CHECK = "cuda-check"
    # a process that finds no GPU to use (value: NO_GPU_TEXTS' key of the words that say so)
    NO_GPU = "no-gpu"
    # the dynamic loader failing on a library the build links against (CUDA's, NCCL's, MPI's:
    # printed.BUILD_LIB), on an extension that lacks one of torch's own or the C++ runtime's
    # symbols, or on a library that needs a newer libstdc++ or glibc (value: the library as
    # printed, libnccl.so.2; detail: "missing", the undefined symbol, or the version it needs,
    # GLIBCXX_3.4.29)
    BUILD_LIBRARY = "build-library"
    # torch's own consistency check failing (c10/util/Exception.cpp: "%s INTERNAL ASSERT FAILED
    # at %s:%d, please report a bug to PyTorch. %s"; value: the source file as printed)
    INTERNAL_ASSERT = "internal-assert"
    # torch.compile's backend raised while compiling (value: the backend's name as printed;
    # compile_fn is DDPOptimizer's, which splits the graph of a DDP module at its buckets)
    COMPILER_FAILED = "compiler-failed"
    # a program's own check that its processes run the same versions failing (value: the program):
    # Ray's check_version_info, "Version mismatch: The cluster was started with: Ray: %s Python: %s
    # This process on node %s was started with: ..."
    VERSIONS_DIFFER = "versions-differ"
    # DeepSpeed's op builder refusing to compile its ops with a CUDA toolkit other than torch's
    # (op_builder/builder.py, assert_no_cuda_mismatch: "Installed CUDA version %s does not match
    # the version torch was compiled with %s, unable to compile cuda/cpp extensions ..."; value:
    # the installed toolkit's version, detail: torch's); and nvcc refusing the GPU's architecture
    # ("nvcc fatal   : Unsupported gpu architecture 'compute_89'"; value: "nvcc", detail: it)
    TOOLKIT_MISMATCH = "toolkit-mismatch"
    # torchrun's argument parser refusing an option (CPython argparse's "%(prog)s: error:
    # argument %s: invalid %s value: %r", "... expected one argument", "... invalid choice: %r",
    # "the following arguments are required: %s"; value: the option or the missing argument,
    # detail: the value refused, "" where none was)
    LAUNCHER_ARGUMENT = "launcher-argument"
    # MPICH's mpiexec (Hydra) refusing an option it does not have (value: the option as printed)
    MPI_LAUNCHER_ARGUMENT = "mpi-launcher-argument"
    # a training script's own argument parser refusing a launcher's option, written after the
    # script's name (argparse's "%(prog)s: error: unrecognized arguments: %s"; value: the option)
    MISPLACED_OPTION = "misplaced-option"
    # a training script's own argument parser given no value for an option carrying the process's
    # rank or the job's size (argparse's "invalid int value: ''", "expected one argument"; value:
    # the option)
    EMPTY_RANK_VALUE = "empty-rank-value"
    # a name torch does not have, asked for by code written for another torch release (CPython's
    # "module 'torch.distributed' has no attribute '_all_gather_base'", "cannot import name 'X'
    # from 'torch.Y'"; value: the dotted name)
    TORCH_API_MISSING = "torch-api-missing"
    # torch's Gloo device factory given neither an interface nor a hostname (value: the
    # transport, TCP or UV): GLOO_SOCKET_IFNAME unset and this machine's hostname empty
    GLOO_NO_ADDRESS = "gloo-no-address"
    GLOO_LOOKUP = "gloo-lookup"  # the name Gloo found no address for (an interface or a host)
    # a framework's check that the process count fits its model-parallel layout failing (value:
    # the process count, or "" where the check does not print it; detail: the layout's product)
    PARALLEL_LAYOUT = "parallel-layout"
    # torch saying its build does not fit this machine's GPU or driver (value: which way,
    # "architecture", "old-gpu" or "driver"; detail: the capability or driver version printed,
    # "" where none is)
    GPU_BUILD = "gpu-build"
    # OpenSSH's client unable to look up the host it was told to reach (value: the host as
    # printed; detail: getaddrinfo's words), as a launcher that starts ranks over ssh relays it
    UNRESOLVED_HOST = "unresolved-host"
    # a Python traceback's frame (CPython's '  File "%U", line %d, in %U'; value: the module as
    # its path names it, "deepspeed.runtime.config", detail: "installed" for a file in an installed
    # package or in torch's own tree, "" for the user's own)
    FRAME = "frame"
    # such a frame of torchrun's agent meeting the other nodes' agents: its rendezvous, or the
    # step after it that gathers every node's worker info (value: the function, detail: the module)
    AGENT_MEETING = "agent-meeting"
    # a Python exception as a traceback ends with it ("<type>: <message>"; value: the type as
    # printed, detail: the message)
    EXCEPTION = "exception"
    # pybind11 refusing the arguments of a call into C++ ("<name>(): incompatible constructor
    # arguments. The following argument types are supported:"), one line per signature it
    # supports (value: the callable that signature names, "torch._C._distributed_c10d.TCPStore")
    BINDING_SIGNATURE = "binding-signature"
    # and its "Invoked with: " line after them: the arguments' reprs (value: the positional ones
    # as printed, detail: the keyword ones, "port=80000, ...", "" where none were given)
    INVOKED_WITH = "invoked-with"
    # a rank making an NCCL communicator that waited in the store for rank 0's ncclUniqueId and
    # got an error (value: the store's error as printed, clipped; detail: the key)
    UNIQUE_ID_WAIT = "unique-id-wait"
    # NCCL finding no usable InfiniBand on a node (value: "no-verbs", it could not load
    # libibverbs; "no-device", verbs loaded and no device found)
    IB_UNAVAILABLE = "ib-unavailable"


__all__ = ["ERRNOS", "AddressClass", "Fact", "FactKind"]


@dataclass(frozen=True)
class Fact:
    kind: FactKind
    value: str
    detail: str = ""

    @property
    def address_class(self) -> AddressClass | None:
        if self.kind is not FactKind.ADDRESS:
            return None
        return AddressClass(self.detail)


# errno numbers of Linux (asm-generic/errno.h) the network and process code paths print, with
# their names and strerror() texts: a line may carry any of the three.
ERRNOS: dict[int, tuple[str, str]] = {
    4: ("EINTR", "Interrupted system call"),
    11: ("EAGAIN", "Resource temporarily unavailable"),
    12: ("ENOMEM", "Cannot allocate memory"),
    13: ("EACCES", "Permission denied"),
    28: ("ENOSPC", "No space left on device"),
    32: ("EPIPE", "Broken pipe"),
    97: ("EAFNOSUPPORT", "Address family not supported by protocol"),
    98: ("EADDRINUSE", "Address already in use"),
    99: ("EADDRNOTAVAIL", "Cannot assign requested address"),
    101: ("ENETUNREACH", "Network is unreachable"),
    103: ("ECONNABORTED", "Software caused connection abort"),
    104: ("ECONNRESET", "Connection reset by peer"),
    107: ("ENOTCONN", "Transport endpoint is not connected"),
    110: ("ETIMEDOUT", "Connection timed out"),
    111: ("ECONNREFUSED", "Connection refused"),
    113: ("EHOSTUNREACH", "No route to host"),
}
ERRNO_BY_NAME = {name: number for number, (name, _text) in ERRNOS.items()}
ERRNO_BY_TEXT = {text.lower(): number for number, (_name, text) in ERRNOS.items()}
# Windows Sockets' codes (winsock2.h: WSABASEERR 10000 plus the BSD errno of the same name, whose
# Linux numbers differ), as torch prints them on Windows ("(system error: 10048 - Only one usage
# of each socket address (protocol/network address/port) is normally permitted.)", older builds
# the number alone) and Python ("[WinError 10061] ..."), in the system's language: each read as
# the Linux errno of its name, so one rule reads both systems' logs
WINSOCK_ERRNOS: dict[int, int] = {
    10000 + bsd: ERRNO_BY_NAME[name] for bsd, name in (
        (4, "EINTR"), (13, "EACCES"), (47, "EAFNOSUPPORT"), (48, "EADDRINUSE"),
        (49, "EADDRNOTAVAIL"), (51, "ENETUNREACH"), (53, "ECONNABORTED"), (54, "ECONNRESET"),
        (57, "ENOTCONN"), (60, "ETIMEDOUT"), (61, "ECONNREFUSED"), (65, "EHOSTUNREACH"))}
WINSOCK_PREFIX = r"(?:system error: |WinError )"  # torch's and Python's words before the code


def winsock_code(name: str) -> str:
    """A regex for the Windows Sockets code of the Linux errno ``name``, as printed."""
    number = ERRNO_BY_NAME[name]
    return WINSOCK_PREFIX + str(next(c for c, n in WINSOCK_ERRNOS.items() if n == number))


# Linux's signal numbers (signal(7)) of the signals a launcher reports a process dead of: a
# negative exit code -N (Python's subprocess and multiprocessing, torchelastic, DeepSpeed's
# launcher) or a shell's exit status 128+N.
SIGNALS: dict[int, str] = {
    1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
    9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM",
}
SIGNAL_NUMBERS = {name: number for number, name in SIGNALS.items()}

# CUDA runtime errors (cudaError_t, driver_types.h) by cudaGetErrorString()'s text, which every
# CUDA check macro prints (vLLM's and SGLang's custom all-reduce: "Failed: Cuda error %s:%d
# '%s'", TensorRT-LLM: "CUDA runtime error in %s: %s", torch: "CUDA error: %s"); the driver
# API's twin (cuGetErrorString of CUDA_ERROR_PEER_ACCESS_UNSUPPORTED) words it "across the
# given devices".
CUDA_UNLOADED = "driver shutting down"  # (its text: a call made at the process's exit)
CUDA_ERRORS: dict[str, str] = {
    "peer access is not supported between these two devices": "cudaErrorPeerAccessUnsupported",
    "peer access is not supported across the given devices": "cudaErrorPeerAccessUnsupported",
    "peer access has not been enabled": "cudaErrorPeerAccessNotEnabled",
    "peer access is already enabled": "cudaErrorPeerAccessAlreadyEnabled",
    # cudaErrorInvalidDevice (101; 10 before CUDA 10.1): an ordinal at or past the device count
    "invalid device ordinal": "cudaErrorInvalidDevice",
    # the others whose meaning names a cause (causes/cuda_meaning.py): the texts of
    # cudaGetErrorString (CUDA 12 runtime API, driver_types.h), read only in a check macro's line
    "peer mapping resources exhausted": "cudaErrorTooManyPeers",
    "system has unsupported display driver / cuda driver combination":
        "cudaErrorSystemDriverMismatch",
    "forward compatibility was attempted on non supported HW":
        "cudaErrorCompatNotSupportedOnDevice",
    "the provided PTX was compiled with an unsupported toolchain":
        "cudaErrorUnsupportedPtxVersion",
    "no kernel image is available for execution on the device":
        "cudaErrorNoKernelImageForDevice",
    # cudaErrorInvalidDeviceFunction (98): "the requested device function does not exist or is
    # not compiled for the proper device architecture"
    "invalid device function": "cudaErrorInvalidDeviceFunction",
    # the HIP runtime's (ROCm's hip_code_object.cpp) where a build has no code object for the
    # GPU's architecture (gfx...): "hipErrorNoBinaryForGpu: Unable to find code object for all
    # current devices!", which AMD's ROCm documentation reads as a PyTorch that does not support
    # the GPU
    "Unable to find code object for all current devices": "hipErrorNoBinaryForGpu",
    "no CUDA-capable device is detected": "cudaErrorNoDevice",
    "CUDA-capable device(s) is/are busy or unavailable": "cudaErrorDevicesUnavailable",
    "system not yet initialized": "cudaErrorSystemNotReady",
    "uncorrectable ECC error encountered": "cudaErrorECCUncorrectable",
    "uncorrectable NVLink error detected during the execution": "cudaErrorNvlinkUncorrectable",
    "an illegal memory access was encountered": "cudaErrorIllegalAddress",
    "an illegal instruction was encountered": "cudaErrorIllegalInstruction",
    "misaligned address": "cudaErrorMisalignedAddress",
    "unspecified launch failure": "cudaErrorLaunchFailure",
    "device-side assert triggered": "cudaErrorAssert",
    "too many resources requested for launch": "cudaErrorLaunchOutOfResources",
    # cudaErrorCudartUnloading: "a CUDA Runtime API call cannot be executed because it is being
    # called during process shut down, at a point in time after CUDA driver has been unloaded"
    CUDA_UNLOADED: "cudaErrorCudartUnloading",
    # the driver API's CUDA_ERROR_ILLEGAL_STATE (401, cuGetErrorString), which NCCL's NVLS
    # multicast binding reports when the Fabric Manager or the NVSwitches are not in order
    "the operation cannot be performed in the present state": "CUDA_ERROR_ILLEGAL_STATE",
}
# a C++ name in torch's own namespaces (c10::, at::, torch::), as the Itanium ABI mangles it
# (_ZN3c104cuda9SetDeviceEi; _ZNK for a const member): a symbol only a torch library defines
TORCH_SYMBOL = r"_ZNK?(?:3c10|2at|5torch)"
# ncclResult_t (NCCL's nccl.h, v2.0 to v2.2x; 6 and 7 from v2.12 and v2.14)
NCCL_RESULTS: dict[int, str] = {
    1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
    4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 7: "ncclInProgress",
}
# ncclGetErrorString's texts (NCCL src/init.cc; "internal error" went on with " - please report
# this issue to the NCCL developers" from v2.12), which torch's "NCCL error in: <where>, <text>"
# and nccl-tests' "NCCL failure <where> '<text>'" quote; its default branch, "unknown result code",
# names a code this library does not have (UNKNOWN_RESULT)
UNKNOWN_RESULT = "an unknown result code"
NCCL_RESULT_TEXTS: dict[str, str] = {
    "unhandled cuda error": "ncclUnhandledCudaError",
    "unhandled system error": "ncclSystemError",
    "internal error": "ncclInternalError",
    "invalid argument": "ncclInvalidArgument",
    "invalid usage": "ncclInvalidUsage",
    "remote process exited or there was a network error": "ncclRemoteError",
    "unknown result code": UNKNOWN_RESULT,
}

# the texts long and particular enough that nothing but cudaGetErrorString (and HIP's) prints
# them: read in any line, as a CUDA extension's own check prints them after its own words
# ("error in dcnv3_im2col_cuda: %s", InternImage's DCNv3 op)
CUDA_DISTINCT_ERRORS = tuple(text for text in CUDA_ERRORS if len(text) >= 30)

# a DEATH fact's detail where its printer reports the death before it stops the job's other
# processes, so the launcher did not send that signal: DeepSpeed's launcher (launcher/launch.py)
# polls its processes once a second, and the first it finds ended with a non-zero code it logs
# ("{cmd} exits with return code = {code}", cmd being the last command it spawned, not that
# process's) before sigkill_handler kills the others
BEFORE_TEARDOWN = "before-teardown"

# the check macros' words that open a CUDA error's line (torch's "CUDA error: ", NCCL's "Cuda
# failure 'x'", vLLM's "Failed: Cuda error f:N 'x'", TensorRT-LLM's "CUDA runtime error in f: x"):
# the table's longer texts are read in those lines only
CUDA_CHECK_WORDS = ("CUDA error", "CUDA Error", "Cuda error", "Cuda failure", "CUDA runtime error",
                    "CUDA driver error", "cuda error", "CUDA_ERROR_",
                    # nccl-tests' CUDACHECK (src/common.h): "%s: Test CUDA failure %s:%d '%s'"
                    "Test CUDA failure",
                    # torch 0.x's THCudaCheck (THC/THCGeneral.c): "cuda runtime error (%d) : %s"
                    "cuda runtime error", "THCudaCheck FAIL",
                    # c10/cuda/CUDAFunctions.cpp's device count, which torch.cuda warns with
                    # ("CUDA initialization: Unexpected error from cudaGetDeviceCount(). ...
                    # Error 802: system not yet initialized")
                    "error from cudaGetDeviceCount",
                    # ATen's cuDNN check (its cuBLAS check says "CUDA error")
                    "cuDNN error",
                    # torch's checks as ROCm builds print them ("HIP error: %s", its hipified
                    # C10_CUDA_CHECK), and the HIP runtime's own ("hipErrorNoBinaryForGpu: ...")
                    "HIP error", "hipError")
# The status names of CUDA's libraries that torch's checks print (ATen's AT_CUDNN_CHECK: "cuDNN
# error: %s" of cudnnGetErrorString; TORCH_CUDABLAS_CHECK: "CUDA error: %s when calling `%s`" of
# cublasGetErrorString), read as CUDA errors of those names; what each means is the libraries'
# own documentation (cuDNN's and cuBLAS's API references, cudnnStatus_t and cublasStatus_t)
CUDA_LIBRARY_STATUSES = frozenset(
    f"{library}_STATUS_{status}" for library in ("CUDNN", "CUBLAS")
    for status in ("NOT_INITIALIZED", "ALLOC_FAILED", "ARCH_MISMATCH", "MAPPING_ERROR",
                   "EXECUTION_FAILED", "INTERNAL_ERROR", "NOT_SUPPORTED"))
CUDA_ERROR_NAMES = frozenset(CUDA_ERRORS.values()) | CUDA_LIBRARY_STATUSES

# getaddrinfo(3)'s error codes (glibc's netdb.h) and gai_strerror() texts
GAI_ERRORS: dict[int, tuple[str, str]] = {
    -2: ("EAI_NONAME", "Name or service not known"),
    -3: ("EAI_AGAIN", "Temporary failure in name resolution"),
    -4: ("EAI_FAIL", "Non-recoverable failure in name resolution"),
    -5: ("EAI_NODATA", "No address associated with hostname"),
}
