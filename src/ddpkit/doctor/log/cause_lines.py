"""The lines read for the facts the causes read (doctor/log/causes/, doctor/log/facts/): the last
patterns of the scan's table (doctor/log/patterns.py), fallbacks that read a line only when no
pattern before them did. Their event is a ``job-fact``: nothing reads its kind, the line is an
event so that its facts are read."""

from __future__ import annotations

from ddpkit.doctor.log.facts.printed import HYDRA_REFUSAL, LIGHTNING_INIT
from ddpkit.doctor.log.kinds import EventKind
from ddpkit.doctor.log.line_pattern import LinePattern
from ddpkit.doctor.log.line_pattern import fallback_pattern as _fb
from ddpkit.doctor.log.prefixes import LINE_PREFIXES

# py-spy's status of a thread, in brackets after its id (src/stack_trace.rs, status_str: "idle",
# "active", "active+gil"; causes/pyspy_dump.py)
PYSPY_STATUS = ("active)", "active+gil)", "idle)")
# py-spy's frames of a thread read after its line: the innermost, where it waits and the user's
# code that called it, come first (every line followed is tried against every pattern)
PYSPY_FRAMES = 16

CAUSE_PATTERNS: tuple[LinePattern, ...] = (
    # Facts the causes read from lines no pattern above read: a process's death of a signal, a
    # CUDA peer-access error (doctor/log/causes/silent_kill.py, bus_error.py, peer_access.py)
    # (CUDA's peer-access errors come in a check macro's error line: "Failed: Cuda error ...",
    # "CUDA runtime error in ...", "CUDA error: ..."; rdma-core's mlx5 provider's "mlx5: <host>:
    # got completion with error:")
    _fb(EventKind.JOB_FACT, ("return code", "SIGKILL", "SIGBUS", "rror"),
        r"(?P<detail>return code = -\d+|SIGKILL|SIGBUS|peer access[^\n]*"
        r"|got completion with error)"),
    # torch built without NCCL, Gloo's address families that differ, an env:// rendezvous
    # variable not set (causes/no_backend.py, address_family.py, unset_variable.py)
    # (each line an exception's or a traceback's raise line: the trigger is its error word)
    _fb(EventKind.JOB_FACT, ("rror",),
        r"(?P<detail>Distributed package doesn't have[^\n]*|ss1\.ss_family[^\n]*"
        r"|raise _env_error\([^\n]*|^[^\n]*expected, but not set[^\n]*)"),
    # CUDA's invalid device ordinal, and a rank selecting its GPU in a traceback's lines
    # (causes/device_ordinal.py)
    _fb(EventKind.JOB_FACT, ("rror", "set_device("),
        r"^(?P<detail>[^\n]*invalid device ordinal[^\n]*|[^\n]*\bset_device\([^\n]*)"),
    # NCCL failing to bind NVLink SHARP's multicast memory, and its advice after it (its WARN's
    # lines, which posts wrap: causes/nvls_bind.py)
    _fb(EventKind.JOB_FACT, ("NVLS",),
        r"(?P<detail>Failed to bind NVLink SHARP \(NVLS\) Multicast memory[^\n]*"
        r"|Disable NVLS \(NCCL_NVLS_ENABLE=0\) if you wish to avoid this error)"),
    # a CUDA check macro's error line whose error another rule may not read (causes/cuda_meaning.py)
    # (NCCL's "Cuda failure" comes in an NCCL WARN line, which other patterns read; vLLM's cumem
    # allocator's "CUDA Error: %s at %s:%d", THC's "THCudaCheck FAIL file=%s line=%i error=%i : %s",
    # found by its " error="; c10's device count "Unexpected error from cudaGetDeviceCount(). ...
    # Error %d: %s", which torch.cuda warns with as CUDA initialization fails; nccl-tests' "Test
    # CUDA failure %s:%d '%s'", whose error text may carry no error word)
    _fb(EventKind.JOB_FACT, ("CUDA error", "Cuda error", "CUDA runtime error", "CUDA driver error",
                             "cuda runtime error", "CUDA Error", " error=",
                             "error from cudaGetDeviceCount", "CUDA failure"),
        r"(?P<detail>(?:CUDA [Ee]rror|Cuda error|Cuda failure|CUDA failure|CUDA (?:runtime|driver) error"
        r"|cuda runtime error|THCudaCheck FAIL|Unexpected error from cudaGetDeviceCount)[^\n]*)"),
    # torch.compile's backend that raised (causes/ddp_optimizer.py); torch 2.0's form, "compile_fn
    # raised AttributeError: ...", is an exception's line that other patterns read
    _fb(EventKind.JOB_FACT, ("' raised:",), r"(?P<detail>backend='[^'\n]+' raised:)"),
    # DeepSpeed's op builder refusing a CUDA toolkit other than torch's, raised as
    # CUDAMismatchException or (before v0.8) a bare Exception (causes/cuda_toolkit.py)
    _fb(EventKind.JOB_FACT, ("torch was compiled with",),
        r"(?P<detail>Installed CUDA version [^\n]*torch was compiled with[^\n]*)"),
    # nvcc refusing the GPU's architecture as a JIT build compiles for it (causes/cuda_toolkit.py)
    _fb(EventKind.JOB_FACT, ("Unsupported gpu architecture",),
        r"(?P<detail>nvcc fatal\s*: Unsupported gpu architecture[^\n]*)"),
    # torch saying its CUDA build does not fit the GPU or the driver, a warning at first
    # (causes/gpu_build.py); each of its lines names PyTorch or torch==
    _fb(EventKind.JOB_FACT, ("PyTorch", "torch=="),
        r"(?m)^(?P<detail>[^\n]*(?:is not compatible with the current PyTorch installation|does not "
        r"include kernels for this GPU|PyTorch CUDA builds for release|but your PyTorch was "
        r"compiled|PyTorch no longer supports this GPU|driver on your system is too old)[^\n]*)"),
    # c10d's store failing to bind an address it tried (causes/store_address.py)
    _fb(EventKind.JOB_FACT, ("failed to bind",),
        r"(?P<detail>The server socket has failed to bind to [^\n]*)"),
    # OpenSSH's client unable to look up a host a launcher starts ranks on
    # (causes/ssh_unresolved.py)
    _fb(EventKind.JOB_FACT, ("Could not resolve hostname",),
        r"(?P<detail>ssh: Could not resolve hostname [^\n]*)"),
    # torch's DataLoader reporting a worker a signal killed, posted without its RuntimeError
    # (causes/loader_worker.py)
    _fb(EventKind.JOB_FACT, ("is killed by signal",),
        r"(?P<detail>DataLoader worker \(pid \d+\) is killed by signal: [^\n]*)"),
    # a traceback's source line asserting that torch sees GPUs (causes/gpu_assert.py)
    _fb(EventKind.JOB_FACT, ("device_count()", "is_available()"),
        r"(?P<detail>\bassert\b[^\n]*\bcuda\.(?:device_count|is_available)\(\)[^\n]*)"),
    # a process announcing its global rank (causes/rank_claims.py)
    _fb(EventKind.JOB_FACT, ("GLOBAL_RANK: ",),
        rf"(?P<detail>{LIGHTNING_INIT})"),
    # NCCL's return chain, "<file>:<line> -> <code>" (causes/nccl_result.py)
    # (read on the line after an NCCL WARN, FOLLOW: the failure's origin warns, then returns)
    _fb(EventKind.JOB_FACT, (),
        r"NCCL INFO (?P<detail>[\w/.-]+\.(?:cc|cu|h|cpp):\d+ -> [1-7])\b"),
    # NCCL before 2.17 rejecting 2.17's "undefined" config value (causes/config_undefined.py),
    # an NCCL WARN, or posted bare after torch's "Last error:" (a line it follows)
    _fb(EventKind.JOB_FACT, (), r"(?P<detail>Invalid config \w+ attribute value -2147483648)"),
    # Other programs' own words, when no pattern above read the line: Open MPI's TCP transports
    # (causes/open_mpi_tcp.py); ld.so's run-time "symbol lookup error: <lib>: undefined symbol:
    # ..." (build_library.py) and DDP's reducer's messages posted without their exception, whose
    # own "This error ..." sentence is their trigger (ddp_checks.py). (The lines of torch's
    # other checks come with their exception's name and are read as exceptions; each trigger is
    # a literal an anchor finds, and a pattern tried on few lines keeps the scan fast.)
    _fb(EventKind.JOB_FACT, ("TCP connect", "connect()", "process identifier"),
        r"(?P<detail>Open MPI failed to TCP connect[^\n]*|Message:\s+connect\(\) to \S+ failed"
        r"|received unexpected process identifier[^\n]*"
        r"|accepted a TCP connection from what appears to be[^\n]*"
        r"|inbound MPI TCP connection request[^\n]*|unable to complete a TCP connection[^\n]*)"),
    _fb(EventKind.JOB_FACT, ("symbol lookup error", "This error indicates", "This error is caused"),
        r"(?P<detail>lib\w+\.so[\w.]*: undefined symbol[^\n]*"
        r"|Expected to (?:have finished reduction in the prior iteration|mark a variable ready "
        r"only once)[^\n]*)"),
    # DDP's checks posted without their exception's line (tail anchors: where a run ends)
    _fb(EventKind.JOB_FACT, ("did not receive grad", "DistributedDataParallel device_ids"),
        r"(?P<detail>(?:Parameter(?:s| indices) which did not receive grad for rank"
        r"|DistributedDataParallel device_ids and output_device arguments only work)[^\n]*)"),
    # vLLM's PyNcclCommunicator's assertion message, on the lines after "AssertionError:" (FOLLOW
    # reads them; a pattern without triggers reads only such lines) (communicator_device.py)
    _fb(EventKind.JOB_FACT, (), r"(?P<detail>nccl communicator is created to work on[^\n]*)"),
    # pybind11's signatures of a refused call and the values it was given, on the lines after its
    # "incompatible constructor arguments" (FOLLOW; causes/store_arguments.py)
    _fb(EventKind.JOB_FACT, (), r"(?P<detail>Invoked with: [^\n]*|\b\d+\. (?:\w+\.)*\w+\([^\n]*)"),
    # mp.spawn's parent naming the process whose traceback follows (causes/spawned_failure.py)
    _fb(EventKind.JOB_FACT, ("terminated with the following error",),
        r"(?P<detail>-- Process \d+ terminated with the following error:)"),
    # a Python traceback's frame: the one printed last before an exception is where it was
    # raised (causes/raise_site.py)
    _fb(EventKind.JOB_FACT, ('File "',), r'(?P<detail>File "[^"\n]{1,300}", line \d+, in )'),
    # py-spy's text dump of a process (src/dump.rs, write_trace): a line per thread, "Thread
    # {id} ({status}): \"{name}\"" (the native thread id in decimal on Linux, else "{:#X}" of
    # the pthread id; its status from stack_trace.rs, status_str), then its frames innermost
    # first on the lines after it (FOLLOW), "    {name} ({file}:{line})", the line left out
    # where it is 0 (causes/pyspy_dump.py); each after a launcher's label and tags, if any
    _fb(EventKind.STACK_THREAD, PYSPY_STATUS,
        rf"^{LINE_PREFIXES}\s*Thread (?:0x[0-9A-Fa-f]+|\d+) \((?:active(?:\+gil)?|idle)\)"
        r'(?:: "(?P<name>[^"\n]{0,200})")?\s*$'),
    _fb(EventKind.STACK_FRAME, (),
        rf"^{LINE_PREFIXES} {{4}}(?P<func>[^\s()][^()\n]{{0,200}}?) "
        r"\((?P<file>[^()\s][^()\n]{0,300}?)"
        r"(?::(?P<line>\d{1,9}))?\)\s*$"),
    # NCCL's line for a connection over the net transport, read for its facts (printed.
    # NET_CONNECTION; causes/gdr_one_side.py)
    _fb(EventKind.JOB_FACT, (" via NET/",),
        r"(?P<detail>\d{1,6}\[[0-9a-fA-F]{1,16}\] -> \d{1,6}\[[0-9a-fA-F]{1,16}\] \[(?:send|receive)\] "
        r"via NET/[^\n]{1,60})"),
    # Envoy, a service mesh's sidecar, on a port of the pod it intercepts (printed.MESH_INBOUND;
    # causes/service_mesh.py)
    # (anchored at the line's start: a lazy span from each "envoy" would be tried at every one)
    _fb(EventKind.JOB_FACT, ("inbound|",),
        r"^(?=[^\n]{0,300}\benvoy )[^\n]{0,300}?(?P<detail>cluster inbound\|\d{1,5}\|"
        r"[^\n]{0,100})"),
    # Ray finding /dev/shm smaller than its object store, a warning (causes/shm_small.py)
    _fb(EventKind.JOB_FACT, ("/dev/shm has only",),
        r"(?P<detail>/dev/shm has only \d{1,15} bytes available)"),
    # MPICH's mpiexec refusing an option, a line without an error word (mpi_launcher_arguments.py)
    _fb(EventKind.JOB_FACT, ("unrecognized argument ",), rf"(?P<detail>{HYDRA_REFUSAL}[^\n]*)"),
    # Ray's words for a worker that cannot reach its head (causes/firewall.py)
    _fb(EventKind.JOB_FACT, ("connect to GCS", "connection to redis", "connect to Redis"),
        r"(?P<detail>(?:Unable|Failed) to connect to (?:GCS|Redis)[^\n]*"
        r"|Could not establish connection to redis[^\n]*)"),
)
