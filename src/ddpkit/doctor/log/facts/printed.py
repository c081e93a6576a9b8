"""How torch, CUDA, the dynamic loader and the launchers print the facts of a build, a GPU and a
launch: the regexes that read them, each with the source of its template (facts/extract.py
applies them to a line)."""

from __future__ import annotations

import re

from ddpkit.doctor.log.facts.kinds import CUDA_ERROR_NAMES, CUDA_ERRORS, TORCH_SYMBOL
from ddpkit.doctor.log.facts.program_checks import NO_GPU_TEXTS, TORCH_CHECKS
from ddpkit.launch.torchrun.tracebacks import EXCEPTION_TYPE

# torch's TCPStore (torch/csrc/distributed/c10d/TCPStore.cpp, v2.3 on): "use_libuv was requested
# but PyTorch was build without libuv support, run with USE_LIBUV=0 to disable it." (its words
# say "build"; "built" is read too, should a release mend them)
NO_LIBUV = re.compile(r"use_libuv was requested but PyTorch was buil[dt] without libuv support")
# TORCH_INTERNAL_ASSERT's message (c10/util/Exception.cpp, torch 1.x to 2.x): the file quoted or
# not, its line after a colon
INTERNAL_ASSERT = re.compile(r"INTERNAL ASSERT FAILED at \"?([^\s\":]{1,240})\"?:\d+")
# torch.compile's backend that raised (torch/_dynamo/exc.py, BackendCompilerFailed): v2.0's
# "{backend_name} raised {type}: {message}", from v2.1 "backend={backend_name!r} raised:\n{type}:
# {message}"
COMPILER_FAILED = re.compile(r"backend='([^'\n]{1,80})' raised:"
                             r"|\b(\w{1,80}) raised (?=\w+(?:Error|Exception): )")
# vLLM's PyNcclCommunicator (vllm/distributed/device_communicators/pynccl.py, 2024 on; SGLang's
# copy too) asserting before each collective: "this nccl communicator is created to work on
# {self.device}, but the input tensor is on {tensor.device}"
DEVICE_MISMATCH = re.compile(r"nccl communicator is created to work on (\w+(?::\d+)?),?"
                              r"(?:\s*but the input tensor is on (\w+(?::\d+)?))?")
TORCH_CHECK = re.compile("|".join(re.escape(words) for words in TORCH_CHECKS))
# torch's ProcessGroupWrapper (c10d/ProcessGroupWrapper.cpp, TORCH_DISTRIBUTED_DEBUG=DETAIL):
# "Detected mismatch between collectives on ranks. Rank %d is running collective: %s, but Rank
# %d is running collective: %s."
# (each collective printed as its CollectiveFingerPrint, "OpType=ALLREDUCE" among its fields)
OP_TYPE = re.compile(r"\bOpType=(\w+)")
# Gloo's TCP pair refusing a message larger than the buffer the receiving collective posted
# (gloo/transport/tcp/pair.cc, Pair::prepareRead: GLOO_ENFORCE_LE(op.preamble.length, op.nbytes),
# since 2018; from 2025-07 with "Received data size doesn't match expected size. Is there a
# distributed collective mismatch in your code?"), as GLOO_ENFORCE prints a check
# (gloo/common/logging.h: "[enforce fail at <file>:<line>] <condition>. <x> vs <y>"): the ranks ran
# different collectives, or one on tensors of different sizes
# torch.multiprocessing's parent reporting a spawned process's exception (torch/multiprocessing/
# spawn.py, ProcessContext.join: ProcessRaisedException's message "\n\n-- Process %d terminated
# with the following error:\n" and the child's own traceback after it): the process's index, the
# first argument mp.spawn gives the function (most scripts make it the rank)
SPAWNED_FAILED = re.compile(r"-- Process (\d{1,6}) terminated with the following error:")
# The store key a rank's address waits under while a Gloo process group connects: Gloo's TCP
# context sets its own address under its rank's number and waits for every other rank's
# (gloo/transport/tcp/context.cc, createAndConnectAllPairs: store->set(std::to_string(rank), ..),
# store->wait_get(std::to_string(key), ..)), inside the prefixes torch's process group puts before
# it (distributed_c10d.py: PrefixStore(f"{group_name}/", ..), then PrefixStore(f"{device}/", ..);
# ProcessGroupGloo: a PrefixStore of the device's index; each prefix joined with "/"), so a wait
# that times out names "<pg>/<group>//cpu//<device index>/<rank>" (torch's "wait timeout after
# <ms>ms, keys: ..."): that rank never published its address
GLOO_PEER_KEY = re.compile(r"keys?: ?\[?'?/?[\w.-]{0,200}/[\w.-]{0,200}//cpu//\d{1,4}/(\d{1,9})\b")
# torchrun's agent (elastic/agent/server/api.py, _assign_worker_ranks, torch 2.x): each agent sets
# "torchelastic/role_info/<its node rank>" in the rendezvous store and multi_gets every node's;
# the wait that times out lists every key it asked for ("wait timeout after <ms>ms, keys:
# /<run id>/torchelastic/role_info/0, ..."): one node rank never set its own
NODE_ROLE_KEY = re.compile(r"torchelastic/role_info/(\d{1,6})\b")
# ... and node rank 0's agent, once it holds every node's, sets "torchelastic/assigned_ranks/<node
# rank>" for each, which every other agent waits for ("wait timeout after <ms>ms, keys:
# /<run id>/torchelastic/assigned_ranks/2")
NODE_ASSIGNED_KEY = re.compile(r"torchelastic/assigned_ranks/(\d{1,6})\b")
# init_process_group's file:// init_method (torch/distributed/rendezvous.py, _file_rendezvous_handler:
# a FileStore on that path), as a script's source line or its printed arguments show it (an
# init_method= keyword, detectron2-style --dist-url, or the store's class named beside it); where
# the line builds the path ("file://" + path, f"file://{path}") the URL read is "file://" alone
FILE_STORE = re.compile(r"(?:init_method|dist[_-]url|FileStore)\W{0,8}(file://(?:/?[^\s'\"`,){}+]"
                        r"{1,400})?)")
# torchrun's agents' exit barrier (torch/distributed/elastic/agent/server/api.py, _exit_barrier:
# store_util.barrier with key_prefix _TERMINAL_STATE_SYNC_ID, whose keys are "<prefix>num_members"
# and "<prefix>last_member"): entered only once this node's workers succeeded; a wait on these
# keys that timed out ("DistStoreError: wait timeout after 300000ms, keys:
# /<run id>/torchelastic/agent/terminal_state/last_member", which the agent logs with "Error
# waiting on exit barrier" and goes on) is the agent waiting for other nodes, no rank's failure
EXIT_BARRIER_KEY = "torchelastic/agent/terminal_state"
# torch's DataLoader reporting a worker that a signal killed (torch/csrc/DataLoader.cpp, the
# SIGCHLD handler's check, v1.x to v2.13: "DataLoader worker (pid %d) is killed by signal: %s. "
# with strsignal(3)'s name, and for SIGBUS "It is possible that dataloader's workers are out of
# shared memory. Please try to raise your shared memory limit.")
LOADER_WORKER_KILLED = re.compile(r"DataLoader worker \(pid (\d{1,10})\) is killed by signal: "
                                  r"(Killed|Bus error|Segmentation fault|Aborted|Terminated)\b")
# glibc's strsignal(3) names of the signals above
STRSIGNAL = {"Killed": "SIGKILL", "Bus error": "SIGBUS", "Segmentation fault": "SIGSEGV",
             "Aborted": "SIGABRT", "Terminated": "SIGTERM"}
# a Python traceback's source line of an assert statement on what torch.cuda sees (CPython prints
# the failing line after its frame; causes/gpu_assert.py)
GPU_ASSERT = re.compile(r"\bassert\b[^\n]{0,200}?\bcuda\.(device_count|is_available)\(\)")
# autograd's SavedVariable::unpack (torch/csrc/autograd/saved_variable.cpp, v1.5 to v2.x): "one of
# the variables needed for gradient computation has been modified by an inplace operation: [" <<
# data_.toString() << " " << data_.sizes() << "]", then, where the tensor has a grad_fn, ", which
# is output " << output_nr_ << " of " << grad_fn->name() << ",", then " is at version %d; expected
# version %d instead." (the tensor's type: torch.cuda.FloatTensor, torch.FloatTensor)
IN_PLACE_CHANGE = re.compile(r"modified by an inplace operation: \[?[\w.]{1,60} \[([\d, ]{0,80})\]\]?"
                             r"(?:, which is output \d{1,4} of (\w{1,80}),)?")
GLOO_SIZE_MISMATCH = re.compile(r"op\.preamble\.length <= op\.nbytes\. (\d{1,20}) vs (\d{1,20})")
# glibc's dynamic loader (dlerror(3), as Python's ImportError/OSError and ctypes print it): "<lib>:
# cannot open shared object file: No such file or directory", "<path>/<lib>: undefined symbol:
# <name>" (and ld.so's lazy binding, "symbol lookup error: <lib>: undefined symbol: <name>"). The
# loader's words are found first and the file name before them read (extract.py, _libraries): a
# search from a path's every character would cost the square of a long line.
LOADER_MISSING = ": cannot open shared object file"
LOADER_UNDEFINED = ": undefined symbol: "
# macOS's dyld (as Python's ImportError prints dlopen's error): "dlopen(<path>, <mode>): Library not
# loaded: <the library's install name>", then "Referenced from: <path>" and "Reason: image not
# found" (newer releases: "(no such file)"); the library's file name is the install name's last part
LOADER_NOT_LOADED = "Library not loaded: "
# The libraries a torch build links against, by file name: CUDA's and NCCL's (and torch's own CUDA
# parts), and for a build with the MPI backend (USE_DISTRIBUTED with MPI, conda's and Homebrew's
# builds) Open MPI's and MPICH's, UCC's and UCX's; not NCCL's optional plugins (libnccl-net.so,
# -tuner, -profiler, -env: NCCL dlopens them and goes on with its internal implementation when
# there is none, "NET/Plugin : dlerror=... No plugin found")
COMMUNICATION_LIB = r"lib(?:mpi\w*|open-rte|open-pal|ucc|ucp|ucs)\b"  # (MPI's, UCC's, UCX's)
BUILD_LIB = re.compile(r"(?:lib(?:nccl(?!-(?:net|tuner|profiler|env))|cuda|cudart|cublas(?:Lt)?"
                       r"|cudnn\w*|nvrtc|cusparse(?:Lt)?|cufft|curand|cusolver|nvJitLink|nvToolsExt"
                       rf"|cupti|torch_cuda|c10_cuda)\b|{COMMUNICATION_LIB})[\w.-]*?"
                       r"\.(?:so[\w.]*|dylib)")
# a library of any name (a program's own, an extension module) by file name
SHARED_LIB = re.compile(r"[\w.+-]+\.(?:so[\w.]*|dylib)")
# a function of the CUDA or NCCL API (their names: the library's prefix, then a capital,
# ncclCommRegister, cudaGetDriverEntryPointByVersion) another library or an extension module
# misses (the NCCL or CUDA it found is older than the one it was built against), or one of
# torch's own C++ symbols (Itanium mangling of the c10::, at:: and torch:: namespaces, _ZN3c10...,
# _ZNK2at...) an extension misses: built against another torch release than the one it is loaded
# into
CUDA_SYMBOL = re.compile(r"(?:nccl|cuda|cublas|cudnn|nvrtc|cusparse|cufft|curand|cusolver)[A-Z]\w*")
TORCH_SYMBOL_NAME = re.compile(rf"{TORCH_SYMBOL}\w*")
# one of the C++ standard library's symbols (Itanium mangling of std::, _ZNSt..., _ZNKSt...,
# _ZSt..., its vtables and typeinfo _ZTVSt, _ZTISt...) a library misses: it was compiled by a
# newer GCC, whose libstdc++ has it, than the libstdc++.so.6 the process loaded (a conda
# environment's own, older one found first, usually)
CXX_RUNTIME_SYMBOL = re.compile(r"_Z(?:N?K?|T[VIS]N?)St\w+")
SYMBOL = re.compile(r"\w+")
# glibc's loader on a library that needs a newer version of a versioned library than the machine
# has (elf/dl-version.c: "%s: version `%s' not found (required by %s)"; newer releases quote it
# 'like this'): libstdc++'s GLIBCXX_ and CXXABI_ versions, glibc's own GLIBC_ ones
CXX_RUNTIME_VERSION_TAGS = ("GLIBCXX_", "CXXABI_")
GLIBC_VERSION_TAG = "GLIBC_"
RUNTIME_VERSION_TAGS = (*CXX_RUNTIME_VERSION_TAGS, GLIBC_VERSION_TAG)
LOADER_VERSION_MISSING = "' not found (required by "
LOADER_VERSION = re.compile(r"version [`']((?:" + "|".join(RUNTIME_VERSION_TAGS) + r")[\d.]{1,12})"
                            + re.escape(LOADER_VERSION_MISSING) + r"([^)\s]{1,400})\)")
# a CUDA check macro's failure, with the error's text as it printed it: torch's "CUDA error: %s"
# (c10/cuda/CUDAException.cpp), NCCL's CUDACHECK "Cuda failure [%d] '%s'", vLLM's "Failed: Cuda
# error %s:%d '%s'", THC's "cuda runtime error (%d) : %s at %s:%d" (and the "THCudaCheck FAIL
# file=%s line=%i error=%i : %s" it prints first), TensorRT-LLM's "CUDA runtime error in %s: %s",
# vLLM's cumem allocator's "CUDA Error: %s at %s:%d" (the driver's text)
CUDA_CHECK = re.compile(r"\bCUDA error: ([^\n.(]{3,80})"
                         r"|\bCUDA Error: ([^\n]{3,80}?) at [^\s:]{1,200}:\d+"
                         r"|Cuda failure (?:\d+ )?'([^'\n]{3,80})'"
                         # nccl-tests' CUDACHECK (src/common.h): "%s: Test CUDA failure %s:%d '%s'"
                         r"|Test CUDA failure [\w/.-]+:\d+ '([^'\n]{3,80})'"
                         r"|Cuda error [\w/.-]+:\d+ '([^'\n]{3,80})'"
                         r"|cuda runtime error \(\d+\) : ([^\n]{3,80}?) at "
                         r"|THCudaCheck FAIL file=\S{1,300} line=\d+ error=\d+ : ([^\n]{3,80})"
                         r"|CUDA runtime error in [^:\n]+: ([^\n]{3,80})")
# torchrun's argument parser refusing its options (torch/distributed/run.py's parser, argparse's
# "%(prog)s: error: %(message)s"; prog "torchrun", or "run.py"/"launch.py" for python -m
# torch.distributed.run/launch, where only torchrun's own options name it as torchrun's)
TORCHRUN_OPTION = (r"--(?:nnodes|nproc[-_]per[-_]node|node[-_]rank|master[-_]addr|master[-_]port"
                    r"|rdzv[-_]\w+|max[-_]restarts|start[-_]method|log[-_]dir|redirects|tee"
                    r"|local[-_]addr|monitor[-_]interval|role|logs[-_]specs)")
LAUNCHER_ARGUMENT = re.compile(
    r"\b(?:torchrun: error: (?:argument (--[\w-]+)|the following arguments are required: "
    rf"([^\n]{{1,80}}))|(?:run|launch)\.py: error: argument ({TORCHRUN_OPTION}))"
    r"(?:/--[\w-]+)*(?:: invalid \w+ value: '([^'\n]{0,80})'|: invalid choice: '([^'\n]{0,80})'"
    r"|: expected one argument)?"
    # an option it does not have, given before the script's name (argparse's "unrecognized
    # arguments: %s"; after the script's name every argument is the script's); for run.py and
    # launch.py (a training script may have either name) only an option of torchrun's families,
    # misspelt ("--master_porp"), not --local-rank (a script's own parser refusing it is
    # local-rank-argument's)
    r"|\b(?:torchrun|(?:run|launch)\.py(?=: error: unrecognized arguments: --(?:nnodes|nproc"
    r"|node|master|rdzv|max|start[-_]method|log[-_]dir|redirects|tee|local[-_]addr|monitor"
    r"|use[-_]env|standalone)))"
    r": error: unrecognized arguments: (--[\w-]+)(?:=([^\s'\n]{0,80}))?")
# A training script's parser (argparse: "%(prog)s: error: unrecognized arguments: %s", prog the
# script's file name) refusing an option of a launcher's: torchrun's (run.py's parser), the
# older launch.py's --use_env, DeepSpeed's runner (--num_gpus, --num_nodes, --hostfile,
# --include, --master_addr), accelerate launch's (--num_processes, --num_machines,
# --machine_rank, --main_process_ip/port) and paddle.distributed.launch's --gpus. Not run.py or
# launch.py (torchrun's own prog under python -m), not --local-rank (local-rank-argument's).
MISPLACED_OPTION = re.compile(
    r"\b(?!(?:run|launch)\.py:)[\w.-]{1,80}\.py: error: unrecognized arguments:(?: [^\n]*?)?? "
    r"(--(?:nnodes|nproc[-_]per[-_]node|node[-_]rank|master[-_]addr|master[-_]port|rdzv[-_]\w+"
    r"|standalone|use[-_]env|max[-_]restarts|num[-_]gpus|num[-_]nodes|hostfile|include"
    r"|num[-_]processes|num[-_]machines|machine[-_]rank|main[-_]process[-_](?:ip|port)|gpus))"
    r"(?![\w-])")
# PyTorch Lightning's line as each process joins its process group, printed right before its
# call of init_process_group, which waits for every member: "initializing ddp: GLOBAL_RANK: %d,
# MEMBER: %d/%d" (1.0 to 1.4, plugins/training_type/ddp.py; "initializing ddp (SLURM): ..." in
# 1.0's slurm_connector.py), "initializing distributed: ..." (1.5), "Initializing distributed: ..."
# (lightning_fabric 1.6 on, utilities/distributed.py, _init_dist_connection); groups: the global
# rank and the world size. Then its rank 0 says every member came: "All DDP processes registered.
# Starting ddp with %d processes" (to 1.5), "All distributed processes registered. Starting with
# %d processes" (1.6 on)
LIGHTNING_INIT = (r"[Ii]nitializing (?:ddp|distributed)(?: \(SLURM\))?: GLOBAL_RANK: (\d+), "
                  r"MEMBER: \d+/(\d+)")
LIGHTNING_REGISTERED = r"All (?:DDP|distributed) processes registered\. Starting (?:ddp )?with \d+"
# A training script's own parser (argparse: "%(prog)s: error: argument %s: invalid %s value: %r",
# "... expected one argument"; the action's option strings joined by "/") given no value for an
# option that carries the process's rank or the job's size: "--rank=$RANK" or '--rank "$RANK"' with
# the variable empty or unset in the shell that ran it (the value's repr, ''), or "--rank $RANK
# --world_size 2" with it unset (the option then meets the next option). Not torchrun's own parser
# (prog torchrun, run.py or launch.py: causes/launcher_arguments.py), not --local-rank (its
# launcher's to give: local-rank-argument's)
EMPTY_RANK_VALUE = re.compile(
    r"(?<![\w.-])(?!(?:run|launch)\.py:|torchrun:)[\w.-]{1,80}: error: argument (?:-\w/)?"
    r"(--(?:(?:node|machine|global)[-_])?rank|--world[-_]size|--nnodes|--num[-_](?:nodes|machines)"
    r"|--nproc[-_]per[-_]node)(?![\w-])(?:/--?[\w-]+)*: (?:invalid \w+ value: ''|expected one "
    r"argument)")
# DeepSpeed's op builder (op_builder/builder.py, v0.3 to v0.19): "Installed CUDA version %s does
# not match the version torch was compiled with %s, unable to compile ..." raised; the same words
# printed before "but since the APIs are compatible, accepting this combination" (minor versions
# of one major) or "Detected `DS_SKIP_CUDA_CHECK=1`: Allowing this combination" are no refusal
TOOLKIT = re.compile(r"Installed CUDA version (\d+\.\d+) does not match the version torch was "
                      r"compiled with (\d+\.\d+)(?:\.\d+)?(?![^\n]*(?:but since the APIs|Allowing "
                      r"this combination))")
# nvcc refusing a GPU architecture it does not know (its driver: "nvcc fatal   : Unsupported gpu
# architecture 'compute_89'"), as a JIT build of a framework's CUDA ops passes the GPU's own
# (-gencode=arch=compute_89): the toolkit is older than the GPU
NVCC_ARCH = re.compile(r"nvcc fatal\s*: Unsupported gpu architecture '(compute_\w+|sm_\w+)'")
NO_GPU = re.compile("|".join(re.escape(words) for words in NO_GPU_TEXTS))
# Ascend's runtime on a device index the process cannot use: error 107001,
# ACL_ERROR_RT_INVALID_DEVICEID, "invalid device id" (CANN's acl_base.h and its error table), the
# runtime's counterpart of CUDA's cudaErrorInvalidDevice; as torch_npu prints it ("NPU function
# error: aclrtSetDevice(...), error code is %d") and the runtime's own log ("open device %u
# failed, runtime result = %d.")
ACL_INVALID_DEVICE_CODE = "107001"
ACL_INVALID_DEVICE_NAME = "ACL_ERROR_RT_INVALID_DEVICEID"
ACL_INVALID_DEVICE = re.compile(rf"\b(?:runtime result =|error code is|ret ?=) ?{ACL_INVALID_DEVICE_CODE}\b")
CUDA_ERROR = re.compile("|".join(re.escape(t) for t in CUDA_ERRORS)
                         + r"|\b(" + "|".join(sorted(CUDA_ERROR_NAMES)) + r")\b")
# a torch name that is not there (CPython 3.7 on: AttributeError's "module %R has no attribute
# %R", ImportError's "cannot import name %R from %R (%s)", ModuleNotFoundError's "No module named
# %R" of a torch submodule); not a module torch's own import left "partially initialized" (a
# circular import: a script named torch.py, not a release mismatch), nor torch's compiled core
# torch._C missing (Python run inside a torch source tree, or a broken install)
TORCH_API_MISSING = re.compile(r"(?<!partially initialized )module '(torch(?:\.[\w.]+)?)' has no "
                               r"attribute '(\w+)'(?! \(most likely due to a circular import)"
                               r"|cannot import name '(\w+)' from '(torch(?:\.[\w.]+)?)'"
                               r"|No module named '(torch\.(?!_C')[\w.]+)'")
# torch's compiled core without its CUDA bindings: torch/csrc/cuda/Module.cpp registers
# torch._C._cuda_* (_cuda_setDevice, _cuda_getDeviceCount, ...) only in a build with CUDA, and
# torch.cuda's Python calls some of them without its "not compiled with CUDA" check first (2.x:
# set_device): a CPU-only build, not code written for another torch release
CUDA_BINDING_MISSING = re.compile(r"module 'torch\._C' has no attribute '_cuda_\w+'")
# torch's word that its CUDA build does not fit the GPU or the driver: torch/cuda/__init__.py's
# capability checks (1.x to 2.x: _check_cubins' "%s with CUDA capability sm_%d is not compatible
# with the current PyTorch installation"; 2.9 on: _warn_unsupported_code's "Your installed
# torch==%s does not include kernels for this GPU" or "No published PyTorch CUDA builds for release
# %s support this GPU"; 1.x: incorrect_binary_warn's "... which requires CUDA_VERSION >= %d to\n
# work properly, but your PyTorch was compiled\n with CUDA_VERSION %d" and old_gpu_warn's "PyTorch
# no longer supports this GPU because it is too old") and c10/cuda/CUDAFunctions.cpp's "The NVIDIA
# driver on your system is too old (found version %d) ... install a PyTorch version ..."
# (cudaErrorInsufficientDriver where torch first counts its GPUs). Each line carries "PyTorch" or
# "torch==", the words its scan pattern is found by.
GPU_BUILD = re.compile(r"with CUDA capability (sm_\d+) is not compatible with the current "
                       r"PyTorch installation"
                       r"|(?:Your installed torch==\S+ does not include kernels for|No published "
                       r"PyTorch CUDA builds for release \S+ support) this GPU"
                       r"|work properly, but your PyTorch was compiled"
                       r"|(PyTorch no longer supports this GPU because it is too old)"
                       r"|The NVIDIA driver on your system is too old \(found version (\d+)\)")
# OpenSSH's client failing to look the host up (ssh.c, main: fatal("%s: Could not resolve
# hostname %.100s: %s", __progname, host, ssh_gai_strerror(r)), OpenSSH 5 to 9), as pdsh,
# mpirun's rsh launcher or DeepSpeed's runner relay it ("node2: ssh: Could not resolve ...")
SSH_UNRESOLVED = re.compile(r"\bssh: Could not resolve hostname ([^\s:]{1,100}): ([^\n]{1,120})")
# torch's GlooDeviceFactory.cpp (torch/lib/c10d, later torch/csrc/distributed/c10d; 1.x to 2.x),
# makeTCPDevice and makeUVDevice: TORCH_CHECK(!interface.empty() || !hostname.empty(),
# "GlooDeviceFactory::make<T>Device(): interface or hostname can't be empty")
GLOO_NO_ADDRESS = re.compile(r"GlooDeviceFactory::make(\w+?)Device\(\): interface or hostname "
                             r"can't be empty")
# Gloo's device lookup (gloo/transport/tcp/device.cc and uv/device.cc, 2017 to 2025): the same
# GLOO_ENFORCE words whether the name is the interface GLOO_SOCKET_IFNAME names or, unset, this
# machine's own hostname: "Unable to find address for: %s"
GLOO_LOOKUP = re.compile(r"Unable to find address for:? ([^\s;]{1,255})")
# a framework's check that the processes fit the model's parallel layout: Megatron-LM's
# parallel_state.initialize_model_parallel (and its copies in Megatron-DeepSpeed, vLLM, NeMo):
# "world_size (%d) is not divisible by tensor_model_parallel_size (%d) x
# pipeline_model_parallel_size (%d)[ x context_parallel_size (%d)]"; TensorRT-LLM's
# WorldConfig::mpi (cpp/tensorrt_llm/runtime/worldConfig.cpp): "Assertion failed: mpiSize == tp *
# pp" (to v0.9), then "MPI size %d != TP size %d * PP size %d[ * CP Size %d]"
PARALLEL_LAYOUT = re.compile(
    r"world_size`? \((\d+)\) is not divisible by tensor_model_parallel_size \((\d+)\) x "
    r"pipeline_model_parallel_size \((\d+)\)(?: x \w+_parallel_size \((\d+)\))?"
    r"|MPI size (\d+) != TP size (\d+) \* PP size (\d+)(?: \* CP Size (\d+))?"
    r"|Assertion failed: mpiSize == tp \* pp")
# A Python traceback's frame (CPython's Lib/traceback.py and Python/traceback.c, 2.x to 3.13:
# '  File "%U", line %d, in %U'), after any launcher's rank tag ("[rank0]:", "[default0]:")
FRAME = re.compile(r'(?:^|[\s:\]>])File "([^"\n]{1,300})", line \d+, in ([\w<>.]{0,100})')
# torchrun's agent meeting the other nodes' agents (torch.distributed.elastic, 1.9 to 2.13): its
# rendezvous handlers (the rendezvous package: next_rendezvous, the c10d backend's store calls)
# and, in its server's api.py, _rendezvous and the step after it that sets this node's worker
# info in the store and gathers every node's (_assign_worker_ranks; _share_and_gather before 2.2)
AGENT_MEETING_PACKAGE = "torch.distributed.elastic.rendezvous."
AGENT_MEETING_STEPS = frozenset({"_rendezvous", "_assign_worker_ranks", "_share_and_gather"})
AGENT_SERVER = "torch.distributed.elastic.agent.server.api"
# An installed package's file: pip's and Debian's install folders, or torch's own tree as a source
# build or an older build's frames print it ("/opt/pytorch/torch/distributed/...")
_INSTALLED = re.compile(r"/(?:site|dist)-packages/(.+)$|(?:^|/)(torch/.+)$")
# pybind11's refusal of a call's arguments (pybind11.h, cpp_function::dispatcher, 2.x): each
# signature it supports on a line of its own, "    1. <name>(<parameters>) -> <type>", then
# "Invoked with: " and the arguments' reprs joined by ", ", then "; kwargs: " and "key=repr"
# joined by ", " where keywords were given
BINDING_SIGNATURE = re.compile(r"(?:^|[\]:>|]\s?)\s*\d+\. ((?:\w+\.)*\w+)\(")
INVOKED_WITH = re.compile(r"Invoked with: ([^\n]*?)(?:;? ?kwargs: ([^\n]*))?$")
# MPICH's process manager, Hydra (utils/args/args.c, match_arg: HYDU_ERR_SETANDJUMP(...,
# "unrecognized argument %s\n", arg), printed after its "[%s@%s] %s (%s:%d): " prefix, the
# program, host, function and source line): "[mpiexec@node1] match_arg (./utils/args/args.c:160):
# unrecognized argument noprefix", then "unable to parse user arguments" and "error parsing
# parameters" from its callers
# (the words before the option: the scan's fallback for the line reads them too, cause_lines.py)
HYDRA_REFUSAL = (r"\[(?:mpiexec|mpirun)@[^\]\s]{1,80}\] match_arg \([^)\n]{1,120}\): "
                 r"unrecognized argument ")
HYDRA_ARGUMENT = re.compile(HYDRA_REFUSAL + r"(\S{1,80})")
# ProcessGroupNCCL making a communicator (broadcastUniqueNCCLID, torch 2.2 on): every rank but
# the root waits in the store for the root's ncclUniqueId, and a failed get is raised as "[<rank>]
# is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by
# key '<key>', but store->get('<key>') got error: <the store's error>"
UNIQUE_ID_WAIT = re.compile(r"retrieving ncclUniqueId from \[\d+\] via c10d key-value store by key "
                            r"'([^'\n]{0,120})', but store->get\('[^'\n]{0,120}'\) got error: "
                            r"([^\n]{0,120})")
# The exception a traceback ends with, "<type>: <message>" (Lib/traceback.py,
# format_exception_only): a builtin's name or a dotted class, "torch.distributed.DistError"
EXCEPTION = re.compile(rf"(?<![\w.])({EXCEPTION_TYPE}): (\S[^\n]{{0,199}})")


def frame_module(path: str) -> tuple[str, bool]:
    """(the module a frame's path names, dotted; whether the file is an installed package's or
    torch's own): "/x/site-packages/deepspeed/runtime/config.py" -> ("deepspeed.runtime.config",
    True); "train.py" -> ("train", False)."""
    path = path.replace("\\", "/")
    found = _INSTALLED.search(path)
    tail = (found.group(1) or found.group(2)) if found else path.rsplit("/", 1)[-1]
    if tail.endswith(".py"):
        tail = tail[:-3]
    return tail.replace("/", "."), found is not None
# a library refusing torch's launch variables beside a scheduler's own (PyTorch Ignite's idist,
# ignite/distributed/comp_models/native.py, setup_env_vars: "Defined env variables '%s' should
# not be specified with SLURM. Typically, this happens when `torch.distributed.launch` or
# `torch.multiprocessing.spawn` are used. ...", the variables a Python list): two launchers
# assigning one process's rank (the variables one by one in LAUNCH_VARIABLE)
LAUNCHERS_CONFLICT = re.compile(r"env(?:ironment)? variables? '?\[?((?:'?[A-Z][A-Z_]{2,20}'?,? ?)"
                                r"{1,8})\]?'? should not be (?:specified|set|defined) "
                                r"(?:with|under) ([A-Za-z]{2,12})")
LAUNCH_VARIABLE = re.compile(r"\b(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|MASTER_ADDR"
                             r"|MASTER_PORT|NODE_RANK|GROUP_RANK)\b")
# a program's own check that its ranks fell out of step: fairseq's all_gather_list failing to
# decode what the others sent (fairseq/distributed/utils.py, fairseq/distributed_utils.py
# before: "... all_gather_list requires all workers to enter the function together, so this
# error usually indicates that the workers have fallen out of sync somehow. ..."), or a program
# saying so in the same words
RANKS_OUT_OF_STEP = re.compile(r"\b(\w{1,60}) requires all (?:workers|ranks|processes) to enter the "
                               r"function together|\b(?:workers|ranks|processes) (?:have |had )?"
                               r"(?:fallen|fell|gone|got|are|were) out of sync\b")
# NCCL's line for each connection it sets up over the net transport (src/transport/net.cc:
# "Channel %02d[/%d] : %d[%x] -> %d[%x] [send] via NET/%s/%d%s%s", the receiving side "[receive]",
# "/GDRDMA" where the connection uses GPUDirect RDMA, "/Shared" where it is shared): the ranks,
# the side, the network and whether GPUDirect RDMA carries it
NET_CONNECTION = re.compile(r"(\d{1,6})\[[0-9a-fA-F]{1,16}\] -> (\d{1,6})\[[0-9a-fA-F]{1,16}\] "
                            r"\[(send|receive)\] via NET/\w{1,20}/\d{1,4}(/GDRDMA)?")
# Envoy, the sidecar proxy of Istio and other service meshes, on the cluster it makes for a port
# of the pod it intercepts (Istio names it "inbound|<port>||"; Envoy's debug log: "membership
# update for TLS cluster inbound|23456|| added 0 removed 1", after "envoy <component>", which
# the reader checks apart)
MESH_INBOUND = re.compile(r"\bcluster inbound\|(\d{1,5})\|")
