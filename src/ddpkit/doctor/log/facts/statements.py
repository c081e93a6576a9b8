"""What a program's own check or report states in one line: NCCL's results and its return
chain, CUDA's errors and checks, torch's refusals (a missing backend, an unset launcher variable,
its TORCH_CHECKs, a collective mismatch), the launchers' argument errors, the dynamic loader's
missing libraries, the frameworks' parallel layouts, Gloo's and Open MPI's connection reports,
and a traceback's frames and exception. Each is read from the printing program's template (the
sources are named beside each regex here and in printed.py).

The values any program prints (addresses, errnos, counts, versions) are read in extract.py,
which adds these statements after them. Pure functions.
"""

from __future__ import annotations

import re

from ddpkit.doctor.log.facts import network, printed
from ddpkit.doctor.log.facts.kinds import (
    CUDA_CHECK_WORDS,
    CUDA_DISTINCT_ERRORS,
    CUDA_ERRORS,
    NCCL_RESULT_TEXTS,
    NCCL_RESULTS,
    Fact,
    FactKind,
)
from ddpkit.doctor.log.facts.program_checks import MPI_TCP_TOPICS, NO_GPU_TEXTS, TORCH_CHECKS
from ddpkit.doctor.log.prefixes import LINE_LABEL

# torch's distributed_c10d.py (v1.8 to v2.x, _new_process_group_helper): "Distributed package
# doesn't have NCCL built in" (also MPI, UCC), the Windows and macOS wheels having no NCCL; the
# 1.x source split the literal ("... NCCL " "built in"), which a traceback's raise line shows
_NO_BACKEND = re.compile(r"Distributed package doesn't have (NCCL|MPI|UCC|Gloo)\b")
# the variables torchrun (torch.distributed.launch before it) sets for each worker
_LAUNCHER_VARIABLES = ("RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT"
                       "|GROUP_RANK")
# torch/distributed/rendezvous.py (v1.9 to v2.x), _env_rendezvous_handler's _env_error(var):
# "Error initializing torch.distributed using env:// rendezvous: environment variable %s
# expected, but not set", and the traceback's raise line `raise _env_error("MASTER_ADDR")`;
# torchelastic's utils get_env_variable_or_raise: "Environment variable %s expected, but not set"
_UNSET = re.compile(r"[Ee]nvironment variable (\w+) expected, but not set"
                    r"|raise _env_error\([\"'](\w+)[\"']\)"
                    # torch 0.4's THD (process_group/General.cpp): "rank is not set but it is
                    # required for env:// init method"; a script reading a launcher's variable
                    # itself: os.environ's "KeyError: 'RANK'"
                    r"|\b(rank|world_size) is not set but it is required for env://"
                    rf"|KeyError: '({_LAUNCHER_VARIABLES})'")
# NCCL v2.14.3 to v2.16.5 src/init.cc, parseCommConfig: "Invalid config blocking attribute value
# %d" for anything but 0 and 1; from v2.17.1 (nccl.h.in) the initializer's blocking is
# NCCL_CONFIG_UNDEF_INT, INT_MIN, which those versions reject
_UNDEF_CONFIG = re.compile(r"Invalid config (\w+) attribute value -2147483648\b")
# PyTorch Lightning 1.x (plugins/training_type/ddp.py) and lightning_fabric 2.x
# (utilities/distributed.py, _init_dist_connection): one line per process as it joins
_RANK_CLAIM = re.compile(printed.LIGHTNING_INIT)
# NCCL's return chain (src/include/checks.h, NCCLCHECK and NCCLCHECKGOTO): INFO(NCCL_ALL,
# "%s:%d -> %d", __FILE__, __LINE__, res) at each level a failure returns through
_RETURN = re.compile(r"[\w.-]\.(?:cc|cu|h|cpp):\d+ -> ([1-7])\b")
# an ncclResult_t by its name (torch's detail line "ncclInvalidUsage: This usually reflects ...")
# or by ncclGetErrorString's text where an NCCL error is quoted: torch's "NCCL error in: <where>,
# <text> (run with NCCL_DEBUG=...)", a copy of it without its head, nccl-tests' "NCCL failure
# <where> '<text>'", TensorRT-LLM's NCCLCHECK "Failed, NCCL error <file>:<line> '<text>'", vLLM's
# pynccl_wrapper.py NCCL_CHECK "NCCL error: <text>" (SGLang copies it)
_RESULT_NAME = re.compile(r"\b(" + "|".join(NCCL_RESULTS.values()) + r")\b")
_TEXTS = "|".join(re.escape(t) for t in NCCL_RESULT_TEXTS)
_RESULT_TEXT = re.compile(rf"(?:NCCL error in:? ?[^,\n]*, |NCCL error: |NCCL (?:failure|error) [^\s']+ ')"
                          rf"({_TEXTS})"
                          rf"|(?:^(?:{LINE_LABEL})?|\]:\s?)({_TEXTS}) \(run with NCCL_DEBUG")
# a program's own NCCL check printing the result's number (FastMoE's "NCCL Error at %s:%d value
# %d", and checks like it: "NCCL error ... code %d", "... returned %d"), ncclResult_t's values
_RESULT_NUMBER = re.compile(r"\bNCCL (?:[Ee]rror|ERROR|[Ff]ailure|FAILURE)\b[^\n]{0,200}?"
                            r"\b(?:value|code|result|returned|ret)\s?[:=]?\s?([1-7])\b")
# Open MPI's TCP transports (facts/program_checks.py MPI_TCP_TOPICS), and the btl's "Message: connect() to
# %s:%d failed" line of its "client connect fail" help (opal_asprintf in btl_tcp_endpoint.c)
_MPI_TCP = re.compile("|".join(re.escape(words) for words in MPI_TCP_TOPICS)
                      + r"|^\s*(Message:\s+connect\(\) to \S+ failed)")



_NOT_NAME = re.compile(r"[^\w.+-]")


def first_group(groups: tuple[str | None, ...]) -> str:
    """The first group an alternation matched ("" where none did)."""
    return next((g for g in groups if g), "")


def _libraries(text: str) -> list[Fact]:
    """The libraries the dynamic loader could not load that a cause reads (printed.BUILD_LIB;
    any library missing a CUDA, NCCL, torch or C++ runtime symbol), from the loader's words back
    to the file name before them (its directories left out); and the libraries that need a newer
    libstdc++ or glibc than the machine's, with the version they need."""
    found: list[Fact] = []
    for marker in (printed.LOADER_MISSING, printed.LOADER_UNDEFINED):
        start = 0
        while len(found) < 4 and (at := text.find(marker, start)) >= 0:
            start = at + len(marker)
            before = text[max(0, at - 300):at].split()
            # (the file name's characters at the end of the word: no directory, no "dlerror=")
            name = _NOT_NAME.split(before[-1])[-1] if before else ""
            if marker == printed.LOADER_MISSING:
                if printed.BUILD_LIB.fullmatch(name):
                    found.append(Fact(FactKind.BUILD_LIBRARY, name, "missing"))
                continue
            symbol = printed.SYMBOL.match(text, start)
            needed = symbol.group(0) if symbol else ""
            if needed and (printed.BUILD_LIB.fullmatch(name) or (
                    printed.SHARED_LIB.fullmatch(name)
                    and (printed.CUDA_SYMBOL.match(needed)
                         or printed.TORCH_SYMBOL_NAME.match(needed)
                         or printed.CXX_RUNTIME_SYMBOL.match(needed)))):
                found.append(Fact(FactKind.BUILD_LIBRARY, name, needed))
    if printed.LOADER_VERSION_MISSING in text:  # (the library that needs it, the version)
        found += [Fact(FactKind.BUILD_LIBRARY, needer.rsplit("/", 1)[-1], version)
                  for version, needer in printed.LOADER_VERSION.findall(text)[:4 - len(found)]]
    start = 0
    while len(found) < 4 and (at := text.find(printed.LOADER_NOT_LOADED, start)) >= 0:
        start = at + len(printed.LOADER_NOT_LOADED)
        words = text[start:start + 300].split()
        name = words[0].rsplit("/", 1)[-1] if words else ""
        if printed.BUILD_LIB.fullmatch(name):
            found.append(Fact(FactKind.BUILD_LIBRARY, name, "missing"))
    return found


def _layout(groups: tuple[str | None, ...]) -> Fact:
    """A PARALLEL_LAYOUT match as a fact: the process count and the layout's product."""
    numbers = [int(g) for g in groups if g]
    if not numbers:  # (TensorRT-LLM's bare assertion prints neither)
        return Fact(FactKind.PARALLEL_LAYOUT, "", "")
    product = 1
    for size in numbers[1:]:
        product *= size
    return Fact(FactKind.PARALLEL_LAYOUT, str(numbers[0]),
                " x ".join(str(n) for n in numbers[1:]) + f" = {product}")


def _gpu_build(groups: tuple[str | None, ...]) -> tuple[str, str]:
    """(kind, detail) of a GPU_BUILD match: which way the build does not fit, and its value."""
    architecture, old, driver = groups
    if old:
        return "old-gpu", ""
    if driver:
        return "driver", driver
    return "architecture", architecture or ""


def statement_facts(text: str) -> list[Fact]:
    """The facts of the statements ``text`` holds, in kinds' order."""
    found: list[Fact] = []
    # (also glog's "Check failed: ... unhandled cuda error"; NCCL's CUDACHECK warns "Cuda failure
    # [%d] '%s'" and returns ncclUnhandledCudaError, src/include/checks.h)
    if "unhandled cuda error" in text or ("Cuda failure" in text and "NCCL" in text):
        found.append(Fact(FactKind.NCCL_RESULT, "ncclUnhandledCudaError"))
    elif "nccl" in text or "NCCL" in text or " (run with" in text:
        named = _RESULT_NAME.findall(text) or [
            NCCL_RESULT_TEXTS[a or b] for a, b in _RESULT_TEXT.findall(text)] or [
            NCCL_RESULTS[int(n)] for n in _RESULT_NUMBER.findall(text)]
        found += [Fact(FactKind.NCCL_RESULT, name) for name in named[:1]]
    if "GLOBAL_RANK: " in text:
        found += [Fact(FactKind.RANK_CLAIM, r, w) for r, w in _RANK_CLAIM.findall(text)]
    if " -> " in text:
        found += [Fact(FactKind.NCCL_RETURN, NCCL_RESULTS[int(m)], m) for m in _RETURN.findall(text)]
    if "Invalid config" in text:
        found += [Fact(FactKind.UNDEF_CONFIG, m) for m in _UNDEF_CONFIG.findall(text)]
    if "peer access" in text or "PeerAccess" in text or "device ordinal" in text or any(
            word in text for word in CUDA_CHECK_WORDS) or any(
            error in text for error in CUDA_DISTINCT_ERRORS):
        for match in printed.CUDA_ERROR.finditer(text):
            name = match.group(1) or CUDA_ERRORS[match.group(0)]
            found.append(Fact(FactKind.CUDA_ERROR, name, "" if match.group(1) else match.group(0)))
        found += [Fact(FactKind.CUDA_CHECK, first_group(m.groups()).strip())
                  for m in printed.CUDA_CHECK.finditer(text)][:1]
    if printed.ACL_INVALID_DEVICE_CODE in text and printed.ACL_INVALID_DEVICE.search(text):
        # (read as CUDA's error of the same meaning, the runtime's name in its detail)
        found.append(Fact(FactKind.CUDA_ERROR, "cudaErrorInvalidDevice",
                          printed.ACL_INVALID_DEVICE_NAME))
    if "doesn't have" in text:
        found += [Fact(FactKind.BACKEND_MISSING, m) for m in _NO_BACKEND.findall(text)]
    if "TCP connect" in text or "connect()" in text or "process identifier" in text:
        for match in _MPI_TCP.finditer(text):
            topic = "client connect fail" if match.group(1) else MPI_TCP_TOPICS[match.group(0)]
            found.append(Fact(FactKind.MPI_TCP, topic))
    if "communicator is created to work on" in text:
        found += [Fact(FactKind.DEVICE_MISMATCH, bound, given)
                  for bound, given in printed.DEVICE_MISMATCH.findall(text)]
    if ("Expected to " in text or "No backend type" in text or "does not support" in text
            or "LightningModule has parameters" in text or "did not receive grad" in text
            or "Default process group" in text or "DistributedDataParallel" in text
            or "graph has changed" in text or "Gradient computed twice" in text
            or "Parallel wrappers" in text):
        found += [Fact(FactKind.TORCH_CHECK, TORCH_CHECKS[m]) for m in printed.TORCH_CHECK.findall(text)]
    if "killed by signal: " in text:
        found += [Fact(FactKind.LOADER_WORKER_KILLED, printed.STRSIGNAL[name], pid)
                  for pid, name in printed.LOADER_WORKER_KILLED.findall(text)[:1]]
    if "assert" in text and "cuda." in text:
        found += [Fact(FactKind.GPU_ASSERT, m.group(1), text.strip()[:200])
                  for m in printed.GPU_ASSERT.finditer(text)][:1]
    if "inplace operation" in text:
        found += [Fact(FactKind.IN_PLACE_CHANGE, grad_fn, sizes)
                  for sizes, grad_fn in printed.IN_PLACE_CHANGE.findall(text)[:1]]
    if "Detected mismatch between collectives" in text:
        found.append(Fact(FactKind.COLLECTIVE_MISMATCH,
                          " / ".join(dict.fromkeys(printed.OP_TYPE.findall(text)))))
    if "inbound|" in text and "envoy " in text:
        found += [Fact(FactKind.MESH_INBOUND, port)
                  for port in printed.MESH_INBOUND.findall(text)[:1]]
    if "] via NET/" in text:
        found += [Fact(FactKind.NET_CONNECTION, f"{src} -> {dst}", side + ("+gdr" if gdr else ""))
                  for src, dst, side, gdr in printed.NET_CONNECTION.findall(text)[:1]]
    if "out of sync" in text or "enter the function together" in text:
        found += [Fact(FactKind.RANKS_OUT_OF_STEP, call)
                  for call in printed.RANKS_OUT_OF_STEP.findall(text)[:1]]
    if "terminated with the following error" in text:
        found += [Fact(FactKind.SPAWNED_FAILED, index)
                  for index in printed.SPAWNED_FAILED.findall(text)[:1]]
    if "//cpu//" in text:
        found += [Fact(FactKind.UNJOINED_RANK, rank)
                  for rank in printed.GLOO_PEER_KEY.findall(text)[:1]]
    if "file://" in text:
        found += [Fact(FactKind.FILE_STORE, path) for path in printed.FILE_STORE.findall(text)[:1]]
    if "assigned_ranks/" in text and "timeout" in text:
        found += [Fact(FactKind.ASSIGNED_RANKS_WAIT, rank)
                  for rank in printed.NODE_ASSIGNED_KEY.findall(text)[:1]]
    if "role_info/" in text and "timeout" in text:
        nodes = [int(n) for n in printed.NODE_ROLE_KEY.findall(text)[:4096]]
        found += [Fact(FactKind.NODE_INFO_WAIT, str(max(nodes) + 1))] if nodes else []
    if "op.preamble.length" in text:  # (the bytes sent, then the bytes the receiver expects)
        found += [Fact(FactKind.COLLECTIVE_MISMATCH, "", f"{sent} vs {expected}")
                  for sent, expected in printed.GLOO_SIZE_MISMATCH.findall(text)[:1]]
    if ("shared object file" in text or "undefined symbol" in text
            or printed.LOADER_NOT_LOADED in text or printed.LOADER_VERSION_MISSING in text):
        found += _libraries(text)
    if ("GPU" in text or "NVIDIA driver" in text or "compiled with CUDA" in text
            or "driver initialization" in text or "NoDevFiles" in text):
        found += [Fact(FactKind.NO_GPU, NO_GPU_TEXTS[m]) for m in printed.NO_GPU.findall(text)[:1]]
    if ": error: " in text:  # torchrun's argument parser (argparse)
        found += [Fact(FactKind.LAUNCHER_ARGUMENT,
                       (m.group(1) or m.group(3) or m.group(6) or m.group(2)).strip(),
                       m.group(4) or m.group(5) or m.group(7) or "")
                  for m in printed.LAUNCHER_ARGUMENT.finditer(text)][:1]
        found += [Fact(FactKind.EMPTY_RANK_VALUE, option)
                  for option in printed.EMPTY_RANK_VALUE.findall(text)][:1]
    if "has no attribute '_cuda_" in text and printed.CUDA_BINDING_MISSING.search(text):
        found.append(Fact(FactKind.NO_GPU, NO_GPU_TEXTS["Torch not compiled with CUDA enabled"]))
    elif "has no attribute" in text or "cannot import name" in text or "No module named" in text:
        found += [Fact(FactKind.TORCH_API_MISSING, m.group(5) or f"{m.group(1) or m.group(4)}."
                                                                 f"{m.group(2) or m.group(3)}")
                  for m in printed.TORCH_API_MISSING.finditer(text)][:1]
    if "torch was compiled with" in text:  # DeepSpeed's op builder, refusing (not accepting)
        found += [Fact(FactKind.TOOLKIT_MISMATCH, a, b) for a, b in printed.TOOLKIT.findall(text)]
    if "Unsupported gpu architecture" in text:  # nvcc, older than the GPU it builds for
        found += [Fact(FactKind.TOOLKIT_MISMATCH, "nvcc", arch)
                  for arch in printed.NVCC_ARCH.findall(text)][:1]
    if "unrecognized arguments" in text:
        found += [Fact(FactKind.MISPLACED_OPTION, m)
                  for m in printed.MISPLACED_OPTION.findall(text)][:1]
    if "Version mismatch: The cluster was started with" in text:  # Ray's check_version_info
        found.append(Fact(FactKind.VERSIONS_DIFFER, "Ray"))
    if "PyTorch" in text or "torch==" in text or "driver on your system" in text:
        found += [Fact(FactKind.GPU_BUILD, *_gpu_build(m.groups()))
                  for m in printed.GPU_BUILD.finditer(text)][:1]
    if "Could not resolve hostname" in text:
        found += [Fact(FactKind.UNRESOLVED_HOST, host, words.strip())
                  for host, words in printed.SSH_UNRESOLVED.findall(text)][:1]
    if "is not divisible by tensor" in text or "MPI size" in text or "mpiSize ==" in text:
        found += [_layout(m.groups()) for m in printed.PARALLEL_LAYOUT.finditer(text)][:1]
    if "find address for" in text:
        found += [Fact(FactKind.GLOO_LOOKUP, m) for m in printed.GLOO_LOOKUP.findall(text)[:1]]
    if "GlooDeviceFactory" in text:
        found += [Fact(FactKind.GLOO_NO_ADDRESS, m) for m in printed.GLOO_NO_ADDRESS.findall(text)[:1]]
    if 'File "' in text:  # a traceback's frame: where the exception after it was raised
        for path, function in printed.FRAME.findall(text)[:1]:
            module, installed = printed.frame_module(path)
            found.append(Fact(FactKind.FRAME, module, "installed" if installed else ""))
            if (module.startswith(printed.AGENT_MEETING_PACKAGE)
                    or (module == printed.AGENT_SERVER
                        and function in printed.AGENT_MEETING_STEPS)):
                found.append(Fact(FactKind.AGENT_MEETING, function, module))
    if "Error: " in text or "Exception: " in text:
        found += [Fact(FactKind.EXCEPTION, kind, message)
                  for kind, message in printed.EXCEPTION.findall(text)[:1]]
    if "Failed to open libibverbs" in text:  # NCCL's ibvwrap.cc (misc/ibvwrap.cc, INFO or WARN)
        found.append(Fact(FactKind.IB_UNAVAILABLE, "no-verbs"))
    elif "NET/IB : No device found" in text or "NET/IB: No device found" in text:
        found.append(Fact(FactKind.IB_UNAVAILABLE, "no-device"))
    if "unrecognized argument " in text:
        found += [Fact(FactKind.MPI_LAUNCHER_ARGUMENT, m)
                  for m in printed.HYDRA_ARGUMENT.findall(text)][:1]
    if "retrieving ncclUniqueId" in text:
        found += [Fact(FactKind.UNIQUE_ID_WAIT, error.strip(), key)
                  for key, error in printed.UNIQUE_ID_WAIT.findall(text)][:1]
    if "Invoked with: " in text:
        found += [Fact(FactKind.INVOKED_WITH, given.strip(), keywords.strip())
                  for given, keywords in printed.INVOKED_WITH.findall(text)][:1]
    if ". " in text and "(" in text:
        found += [Fact(FactKind.BINDING_SIGNATURE, m)
                  for m in printed.BINDING_SIGNATURE.findall(text)][:1]
    if " raised" in text:
        found += [Fact(FactKind.COMPILER_FAILED, first_group(m.groups()))
                  for m in printed.COMPILER_FAILED.finditer(text)][:1]
    if "INTERNAL ASSERT" in text:
        found += [Fact(FactKind.INTERNAL_ASSERT, m) for m in printed.INTERNAL_ASSERT.findall(text)[:1]]
    if "use_libuv" in text:
        found += [Fact(FactKind.STORE_WITHOUT_LIBUV, "libuv") for _m in printed.NO_LIBUV.findall(text)]
    if "ss_family" in text:
        found += [Fact(FactKind.FAMILY_MISMATCH, a, b) for a, b in network.FAMILY.findall(text)]
    if "should not be " in text:
        for names, scheduler in printed.LAUNCHERS_CONFLICT.findall(text)[:1]:
            found += [Fact(FactKind.LAUNCHERS_CONFLICT, name, scheduler.upper())
                      for name in dict.fromkeys(printed.LAUNCH_VARIABLE.findall(names))]
    if ("expected, but not set" in text or "_env_error(" in text or "KeyError: '" in text
            or "required for env://" in text):
        found += [Fact(FactKind.UNSET_VARIABLE, first_group(m.groups()).upper())
                  for m in _UNSET.finditer(text)]
    return found
