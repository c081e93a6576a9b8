"""One line's text in, its typed facts out, whatever message template printed it.

The programs behind a distributed job print the same kinds of value in many templates: an
address ("Using eth0:10.0.0.2<0>", "connect to [::1]:29500", "master_addr=127.0.1.1"), an errno
("errno: 98 - Address already in use", "[Errno 111]", "code: -98, name: EADDRINUSE"), a count
("world_size=2, worker_count=3", "nNodes 2", "--nnodes=2"). The rules reason from these facts,
so a line whose template no pattern knows still says what it says. The catalogue of messages
still tells which program printed a line and at what level; it no longer decides a cause alone.

Pure functions; the result of a text is cached (retry loops print the same text again and again).
"""

from __future__ import annotations

import re
from functools import lru_cache

from ddpkit.doctor.addresses import address_class
from ddpkit.doctor.log.end_lines import FATAL_SIGNALS, SHELL_PREFIX
from ddpkit.doctor.log.facts import network, printed
from ddpkit.doctor.log.facts.kinds import (
    CUDA_CHECK_WORDS,
    CUDA_ERRORS,
    ERRNO_BY_NAME,
    ERRNO_BY_TEXT,
    ERRNOS,
    GAI_ERRORS,
    MPI_TCP_TOPICS,
    NCCL_RESULT_TEXTS,
    NCCL_RESULTS,
    NO_GPU_TEXTS,
    SIGNAL_NUMBERS,
    SIGNALS,
    TORCH_CHECKS,
    WINSOCK_ERRNOS,
    WINSOCK_PREFIX,
    Fact,
    FactKind,
)
from ddpkit.doctor.log.prefixes import without_header

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = re.compile(rf"(?<![\w.])({_OCTET}(?:\.{_OCTET}){{3}})(?![\w.]*\d)(?:(?::|<)(\d{{1,5}}))?")
_IPV6 = re.compile(r"\[([0-9A-Fa-f:]*:[0-9A-Fa-f:.]*)(?:%[\w.-]+)?\](?::(\d{1,5}))?"
                   r"|(?<![\w:])(::1)(?![\w:])")
_LOCALHOST = re.compile(r"(?<![\w.-])(localhost(?:\.localdomain)?)(?![\w.-])(?::(\d{1,5}))?")
# NCCL's "<iface>:<address><port>" (Bootstrap : Using, NET/Socket lists, NET/IB's OOB)
_IFACE_ADDR = re.compile(r"(?:\]|\s|^)([A-Za-z][\w.-]*):([0-9A-Fa-f.:]+)<\d+>")
_PORT = re.compile(r"\b(?:port|MASTER_PORT|master_port)\s*[:=]\s*(\d{1,5})\b")
_IFNAME = re.compile(r"\b([A-Z]+_SOCKET_IFNAME)\b(?:\s*set (?:by environment )?to|\s*[:=])\s*"
                     r"['\"]?([^\s'\",;)]*)")
_ERRNO_NUMBER = re.compile(r"\berrno:? ?=? ?-?(\d{1,3})\b|\[Errno (\d{1,3})\]|\bcode: -(\d{1,3})\b")
_ERRNO_NAME = re.compile(r"\b(E[A-Z]{3,14})\b")
_WINSOCK = re.compile(rf"\b{WINSOCK_PREFIX}(100[0-6]\d)\b|\bWSA(E[A-Z]{{3,14}})\b")
_SIGNAL = re.compile(r"\b(SIG[A-Z]{2,6})\b")
_EXIT = re.compile(r"\bexit ?code\s*[:=]?\s*(-?\d+)|\bexitcode\s*:\s*(-?\d+)")
_WORLD = re.compile(r"\bworld_size\s*[=:]\s*(\d+)")
_WORKERS = re.compile(r"\b(?:worker_count|num_workers_joined)\s*[=:]\s*(\d+)")
# the barrier done (distributed_c10d.py, _store_based_barrier, torch 1.10 on): "Rank %s: Completed
# store-based barrier for key:%s with %s nodes."
_BARRIER_DONE = re.compile(r"Completed store-based barrier for key: ?\S+ with (\d+) nodes")
_NNODES = re.compile(r"--nnodes[= ](\d+)(?::(\d+))?|\bnnodes\s*[=:]\s*(\d+)(?::(\d+))?"
                     r"|\bnNodes (\d+)|\b(?:min_nodes|max_nodes)\s*:\s*(\d+)"
                     r"|\bgroup_world_size\s*=\s*(\d+)")
_VERSIONS = (
    ("nccl", re.compile(r"\bNCCL version (\d+\.\d+\.\d+)")),
    ("torch", re.compile(r"PyTorch version: (\d+\.\d+[\w.+-]*)|\btorch==(\d+\.\d+[\w.+-]*)")),
    ("cuda", re.compile(r"\+cuda(\d+\.\d+)|\bCUDA [Vv]ersion:? (\d+\.\d+)")),
)
_HOSTNAME = re.compile(r"\b(?:master_addr|MASTER_ADDR)\s*[=:]\s*['\"]?([A-Za-z][\w.-]*)"
                       r"|\bhost\s*:\s*([A-Za-z][\w.-]*)")
# NCCL's "connecting to address %s with family %d" with nothing for %s (no address was found)
_EMPTY_ADDRESS = re.compile(r"\baddress\s+with family (-?\d+)")
_ENDPOINT = re.compile(r"rdzv[_-]endpoint\s*[:=]\s*['\"]?([^\s'\",]+)")
# torchelastic (agent/server/api.py, rendezvous/dynamic_rendezvous.py): a worker group restarted,
# a rendezvous re-formed
_RESTART = re.compile(r"\brestart_count=(\d+)|(will restart worker group)"
                      r"|(attempts to join the next round of the rendezvous)")

# A process reported dead of a signal, in each reporter's template: torchelastic's "failed
# (exitcode: -9)" and its summary's "exitcode : -9" (elastic/multiprocessing), DeepSpeed's
# launcher's "{cmd} exits with return code = -9" (launcher/launch.py), Python's
# CalledProcessError "died with <Signals.SIGKILL: 9>." (accelerate's simple launcher re-raises
# it), torch.multiprocessing's "process 0 terminated with signal SIGKILL" (spawn.py),
# torchelastic's "Signal 9 (SIGKILL) received by PID", a shell's exit status 128+N through
# CalledProcessError ("returned non-zero exit status 137."), Open MPI's "exited on signal 9".
_DEATH = re.compile(r"\bexitcode\s*[:=]\s*-(\d{1,2})\b|\breturn code = -(\d{1,2})\b"
                    r"|died with <Signals\.(SIG[A-Z]+): \d+>|terminated with signal (SIG[A-Z]+)"
                    r"|\bSignal (\d{1,2}) \(SIG[A-Z]+\) received by PID"
                    r"|non-zero exit status (1[2-9]\d)\b|\bexited on signal (\d{1,2})\b")
# bash's report of a job a signal ended, alone on its line (jobs.c: strsignal(), "Killed" for
# SIGKILL, "Bus error" for SIGBUS..., after the script's "line N: <pid> " or the job's "[1]+ ",
# "(core dumped)" after it if it dumped core); the kernel's "Killed process N" is not it
_SHELL_SIGNALS = {"Killed": "SIGKILL", **FATAL_SIGNALS}
_SHELL_DEATH = re.compile(SHELL_PREFIX + r"(?:\S+: line \d+: +\d+ +|\[\d+\][+-]? +)?("
                          + "|".join(_SHELL_SIGNALS) + r")(?! +process \d)(?: \(core dumped\))?"
                          r"(?: +\S[^\n]*)?\s*$")
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
# a process selecting its GPU, in a traceback's lines or the failing check's own: torch's
# torch.cuda.set_device (its frame's source line, and torch._C._cuda_setDevice under it), a
# ``.cuda(local_rank)``, torch 1.x's THCudaCheck in torch/csrc/cuda/Module.cpp
_SELECT = re.compile(r"\b(set_device|_cuda_setDevice|cudaSetDevice)\("
                     r"|(\.cuda)\([^()\n]*local_rank|(torch/csrc/cuda/Module\.cpp)")
# NCCL v2.14.3 to v2.16.5 src/init.cc, parseCommConfig: "Invalid config blocking attribute value
# %d" for anything but 0 and 1; from v2.17.1 (nccl.h.in) the initializer's blocking is
# NCCL_CONFIG_UNDEF_INT, INT_MIN, which those versions reject
_UNDEF_CONFIG = re.compile(r"Invalid config (\w+) attribute value -2147483648\b")
# PyTorch Lightning 1.x (plugins/training_type/ddp.py) and lightning_fabric 2.x
# (utilities/distributed.py, _init_dist_connection): one line per process as it joins
_RANK_CLAIM = re.compile(r"[Ii]nitializing (?:ddp|distributed): GLOBAL_RANK: (\d+), "
                         r"MEMBER: \d+/(\d+)")
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
                          rf"|(?:^|\]:\s?)({_TEXTS}) \(run with NCCL_DEBUG")
# Open MPI's TCP transports (facts/kinds.py MPI_TCP_TOPICS), and the btl's "Message: connect() to
# %s:%d failed" line of its "client connect fail" help (opal_asprintf in btl_tcp_endpoint.c)
_MPI_TCP = re.compile("|".join(re.escape(words) for words in MPI_TCP_TOPICS)
                      + r"|^\s*(Message:\s+connect\(\) to \S+ failed)")



_NOT_NAME = re.compile(r"[^\w.+-]")


def _libraries(text: str) -> list[Fact]:
    """The libraries the dynamic loader could not load that a cause reads (printed.CUDA_LIB;
    any library missing a CUDA, NCCL or torch symbol), from the loader's words back to the file
    name before them (its directories left out)."""
    found: list[Fact] = []
    for marker in (printed.LOADER_MISSING, printed.LOADER_UNDEFINED):
        start = 0
        while len(found) < 4 and (at := text.find(marker, start)) >= 0:
            start = at + len(marker)
            before = text[max(0, at - 300):at].split()
            # (the file name's characters at the end of the word: no directory, no "dlerror=")
            name = _NOT_NAME.split(before[-1])[-1] if before else ""
            if marker == printed.LOADER_MISSING:
                if printed.CUDA_LIB.fullmatch(name):
                    found.append(Fact(FactKind.CUDA_LIBRARY, name, "missing"))
                continue
            symbol = printed.SYMBOL.match(text, start)
            needed = symbol.group(0) if symbol else ""
            if needed and (printed.CUDA_LIB.fullmatch(name) or (
                    printed.SHARED_LIB.fullmatch(name)
                    and (printed.CUDA_SYMBOL.match(needed) and name.startswith("lib")
                         or printed.TORCH_SYMBOL_NAME.match(needed)))):
                found.append(Fact(FactKind.CUDA_LIBRARY, name, needed))
    return found


def _deaths(text: str) -> list[Fact]:
    found: list[Fact] = []
    for match in _DEATH.finditer(text):
        minus, deepspeed, python, spawn, summary, status, mpi = match.groups()
        number = int(minus or deepspeed or summary or mpi or 0) or (
            int(status) - 128 if status else SIGNAL_NUMBERS.get(python or spawn or "", 0))
        if number in SIGNALS:
            found.append(Fact(FactKind.DEATH, SIGNALS[number], str(number)))
    shell = _SHELL_DEATH.match(text)
    if shell:
        name = _SHELL_SIGNALS[shell.group(1)]
        found.append(Fact(FactKind.DEATH, name, str(SIGNAL_NUMBERS[name])))
    return found


def _address(found: list[Fact], address: str, port: str | None) -> None:
    kind = address_class(address)
    if kind is None:
        return
    fact = Fact(FactKind.ADDRESS, address.strip("[]"), kind.value)
    if fact not in found:
        found.append(fact)
    if port:
        found.append(Fact(FactKind.PORT, port))


def winsock_errnos(text: str) -> list[int]:
    """The Linux errno of each Windows Sockets code ``text`` names (``WINSOCK_ERRNOS``)."""
    found: list[int] = []
    if "100" not in text and "WSAE" not in text:
        return found
    for code, name in _WINSOCK.findall(text):
        number = WINSOCK_ERRNOS.get(int(code)) if code else ERRNO_BY_NAME.get(name)
        if number is not None:
            found.append(number)
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


def _first(groups: tuple[str | None, ...]) -> str:
    return next((g for g in groups if g), "")


def _gpu_build(groups: tuple[str | None, ...]) -> tuple[str, str]:
    """(kind, detail) of a GPU_BUILD match: which way the build does not fit, and its value."""
    architecture, old, driver = groups
    if old:
        return "old-gpu", ""
    if driver:
        return "driver", driver
    return "architecture", architecture or ""


def facts_of(text: str) -> tuple[Fact, ...]:
    """Every fact ``text`` states, in kinds' order (addresses first). Its prefixes (launcher
    tags, glog's header, NCCL's ``host:pid:tid [dev]``) state none: they are left out before
    the cache is asked, so the same message from other processes, or at other times, is read
    once."""
    return _facts(without_header(text))


@lru_cache(maxsize=4096)
def _facts(text: str) -> tuple[Fact, ...]:
    found: list[Fact] = []
    if "<" in text:
        for match in _IFACE_ADDR.finditer(text):
            found.append(Fact(FactKind.INTERFACE, match.group(1), match.group(2)))
    for match in _IPV4.finditer(text):
        _address(found, match.group(1), match.group(2))
    if "::" in text or "[" in text:
        for match in _IPV6.finditer(text):
            _address(found, match.group(1) or match.group(3), match.group(2))
    if "localhost" in text:
        for match in _LOCALHOST.finditer(text):
            _address(found, match.group(1), match.group(2))
    lowered = text.lower()
    if "port" in lowered:
        found += [Fact(FactKind.PORT, m.group(1)) for m in _PORT.finditer(text)]
    if "IFNAME" in text:
        found += [Fact(FactKind.IFNAME_SETTING, m.group(2), m.group(1))
                  for m in _IFNAME.finditer(text)]
    numbers: list[int] = []
    if "rrno" in text or "code: -" in text:
        numbers += [int(_first(m.groups())) for m in _ERRNO_NUMBER.finditer(text)]
    numbers += [number for name, number in ERRNO_BY_NAME.items() if name in text
                and any(m.group(1) == name for m in _ERRNO_NAME.finditer(text))]
    numbers += [n for t, n in ERRNO_BY_TEXT.items() if t in lowered]
    numbers += winsock_errnos(text)
    for number in dict.fromkeys(numbers):
        found.append(Fact(FactKind.ERRNO, str(number), ERRNOS.get(number, ("", ""))[0]))
    if "SIG" in text:
        found += [Fact(FactKind.SIGNAL, s) for s in dict.fromkeys(_SIGNAL.findall(text))]
    if "exit" in lowered:
        found += [Fact(FactKind.EXIT_CODE, _first(m.groups())) for m in _EXIT.finditer(text)]
    if "world_size" in text:
        found += [Fact(FactKind.WORLD_SIZE, m.group(1)) for m in _WORLD.finditer(text)]
    if "worker" in text:
        found += [Fact(FactKind.WORKER_COUNT, m.group(1)) for m in _WORKERS.finditer(text)]
    if "Completed store-based barrier" in text:
        found += [Fact(FactKind.WORKER_COUNT, m, "completed") for m in _BARRIER_DONE.findall(text)]
    if "odes" in text or "group_world_size" in text:
        nodes = [int(g) for m in _NNODES.finditer(text) for g in m.groups() if g]
        if nodes:
            found.append(Fact(FactKind.NNODES, str(max(nodes))))
    if "version" in lowered or "torch==" in text or "+cuda" in text:
        for whose, regex in _VERSIONS:
            found += [Fact(FactKind.VERSION, _first(m.groups()), whose)
                      for m in regex.finditer(text)]
    if "addr" in lowered or "host" in text:
        for match in _HOSTNAME.finditer(text):
            name = _first(match.groups())
            if address_class(name) is None:
                found.append(Fact(FactKind.HOSTNAME, name))
    if "family" in text:
        found += [Fact(FactKind.EMPTY_ADDRESS, m.group(1)) for m in _EMPTY_ADDRESS.finditer(text)]
    if "endpoint" in text:
        for match in _ENDPOINT.finditer(text):
            found.append(Fact(FactKind.RDZV_ENDPOINT, match.group(1)))
    if "restart" in text or "next round" in text:
        for match in _RESTART.finditer(text):
            if match.group(1):  # the agent's count of restarts so far
                found.append(Fact(FactKind.RESTART, match.group(1), "count"))
            else:  # one restart, or one new round
                found.append(Fact(FactKind.RESTART, "1", "round"))
    if "xit" in text or "code = -" in text or "ignal" in text or any(
            word in text for word in _SHELL_SIGNALS):
        found += _deaths(text)
    if "GCS" in text or "edis" in text:
        for match in network.RAY_UNREACHED.finditer(text):
            address = match.group(1) or match.group(2) or match.group(3) or ""
            found.append(Fact(FactKind.UNREACHED, address, "ray"))
    if "ddresses of (" in text or "onnect to " in text:
        for match in network.DIALLED.finditer(text):
            host, port = [g for g in match.groups() if g][:2]
            found.append(Fact(FactKind.DIALLED, host, port))
    if "gai error" in text:
        for code in network.GAI_ERROR.findall(text):
            found.append(Fact(FactKind.GAI_ERROR, code, GAI_ERRORS.get(int(code), ("", ""))[0]))
    if "/dev/shm" in text:
        found += [Fact(FactKind.SHM_PATH, m) for m in dict.fromkeys(network.SHM_PATH.findall(text))]
    if "completion with error" in text:
        found += [Fact(FactKind.RDMA_ERROR, m) for m in network.RDMA_ERROR.findall(text)]
    if "evice(" in text or ".cuda(" in text or "Module.cpp" in text:
        found += [Fact(FactKind.DEVICE_SELECT, _first(m.groups())) for m in _SELECT.finditer(text)]
    # (also glog's "Check failed: ... unhandled cuda error"; NCCL's CUDACHECK warns "Cuda failure
    # [%d] '%s'" and returns ncclUnhandledCudaError, src/include/checks.h)
    if "unhandled cuda error" in text or ("Cuda failure" in text and "NCCL" in text):
        found.append(Fact(FactKind.NCCL_RESULT, "ncclUnhandledCudaError"))
    elif "nccl" in text or "NCCL" in text or " (run with" in text:
        named = _RESULT_NAME.findall(text) or [
            NCCL_RESULT_TEXTS[a or b] for a, b in _RESULT_TEXT.findall(text)]
        found += [Fact(FactKind.NCCL_RESULT, name) for name in named[:1]]
    if "GLOBAL_RANK: " in text:
        found += [Fact(FactKind.RANK_CLAIM, r, w) for r, w in _RANK_CLAIM.findall(text)]
    if " -> " in text:
        found += [Fact(FactKind.NCCL_RETURN, NCCL_RESULTS[int(m)], m) for m in _RETURN.findall(text)]
    if "Invalid config" in text:
        found += [Fact(FactKind.UNDEF_CONFIG, m) for m in _UNDEF_CONFIG.findall(text)]
    if "peer access" in text or "PeerAccess" in text or "device ordinal" in text or any(
            word in text for word in CUDA_CHECK_WORDS):
        for match in printed.CUDA_ERROR.finditer(text):
            name = match.group(1) or CUDA_ERRORS[match.group(0)]
            found.append(Fact(FactKind.CUDA_ERROR, name, "" if match.group(1) else match.group(0)))
        found += [Fact(FactKind.CUDA_CHECK, _first(m.groups()).strip())
                  for m in printed.CUDA_CHECK.finditer(text)][:1]
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
            or "Default process group" in text or "DistributedDataParallel" in text):
        found += [Fact(FactKind.TORCH_CHECK, TORCH_CHECKS[m]) for m in printed.TORCH_CHECK.findall(text)]
    if "Detected mismatch between collectives" in text:
        found.append(Fact(FactKind.COLLECTIVE_MISMATCH,
                          " / ".join(dict.fromkeys(printed.OP_TYPE.findall(text)))))
    if "shared object file" in text or "undefined symbol" in text:
        found += _libraries(text)
    if ("GPU" in text or "NVIDIA driver" in text or "compiled with CUDA" in text
            or "driver initialization" in text or "NoDevFiles" in text):
        found += [Fact(FactKind.NO_GPU, NO_GPU_TEXTS[m]) for m in printed.NO_GPU.findall(text)[:1]]
    if ": error: " in text:  # torchrun's argument parser (argparse)
        found += [Fact(FactKind.LAUNCHER_ARGUMENT,
                       (m.group(1) or m.group(3) or m.group(6) or m.group(2)).strip(),
                       m.group(4) or m.group(5) or m.group(7) or "")
                  for m in printed.LAUNCHER_ARGUMENT.finditer(text)][:1]
    if "has no attribute" in text or "cannot import name" in text or "No module named" in text:
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
        for path in printed.FRAME.findall(text)[:1]:
            module, installed = printed.frame_module(path)
            found.append(Fact(FactKind.FRAME, module, "installed" if installed else ""))
    if "Error: " in text or "Exception: " in text:
        found += [Fact(FactKind.EXCEPTION, kind, message)
                  for kind, message in printed.EXCEPTION.findall(text)[:1]]
    if "INTERNAL ASSERT" in text:
        found += [Fact(FactKind.INTERNAL_ASSERT, m) for m in printed.INTERNAL_ASSERT.findall(text)[:1]]
    if "use_libuv" in text:
        found += [Fact(FactKind.STORE_WITHOUT_LIBUV, "libuv") for _m in printed.NO_LIBUV.findall(text)]
    if "ss_family" in text:
        found += [Fact(FactKind.FAMILY_MISMATCH, a, b) for a, b in network.FAMILY.findall(text)]
    if ("expected, but not set" in text or "_env_error(" in text or "KeyError: '" in text
            or "required for env://" in text):
        found += [Fact(FactKind.UNSET_VARIABLE, _first(m.groups()).upper())
                  for m in _UNSET.finditer(text)]
    return tuple(found)


def of_kind(facts: tuple[Fact, ...], kind: FactKind) -> tuple[Fact, ...]:
    return tuple(f for f in facts if f.kind is kind)


def barrier_counted(facts: tuple[Fact, ...]) -> tuple[int, int] | None:
    """(workers a store-based barrier counted, the world size) that one line states; None where
    it does not state both (a completed barrier's line states no world size)."""
    worlds = [int(f.value) for f in facts if f.kind is FactKind.WORLD_SIZE]
    counts = [int(f.value) for f in facts if f.kind is FactKind.WORKER_COUNT]
    return (max(counts), worlds[0]) if worlds and counts else None


def endpoint_port(endpoint: str) -> str | None:
    """The port a rendezvous endpoint names (``host:port``, ``[v6]:port``), None without one."""
    text = endpoint.strip()
    if text.startswith("["):
        close = text.find("]")
        rest = text[close + 1 :] if close >= 0 else ""
        return rest[1:] if rest.startswith(":") and rest[1:].isdigit() else None
    if text.count(":") > 1:  # a bare IPv6 address: no port
        return None
    host, _sep, port = text.partition(":")
    return port if port.isdigit() and host else None
