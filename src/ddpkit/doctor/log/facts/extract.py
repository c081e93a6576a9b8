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
from ddpkit.doctor.log.end_lines import (
    DEEPSPEED_NODE,
    FATAL_SIGNALS,
    FIRST_FAILED_CODE,
    OPEN_MPI_SIGNALED,
    SHELL_PREFIX,
    SRUN_TASKS,
    ZSH_SIGNALS,
    hydra_exit,
    zsh_report,
)
from ddpkit.doctor.log.facts import network
from ddpkit.doctor.log.facts.kinds import (
    BEFORE_TEARDOWN,
    ERRNO_BY_NAME,
    ERRNO_BY_TEXT,
    ERRNOS,
    GAI_ERRORS,
    SIGNAL_NUMBERS,
    SIGNALS,
    Fact,
    FactKind,
)
from ddpkit.doctor.log.facts.statements import first_group, statement_facts
from ddpkit.doctor.log.facts.winsock import winsock_errnos
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
# the master address as launchers print or take it (an address, not a name: _HOSTNAME reads those)
_MASTER_ADDRESS = re.compile(r"\b(?:master_addr|MASTER_ADDR|master-addr)\s*[=:]?\s*['\"]?"
                             r"(\d{1,3}(?:\.\d{1,3}){3}|localhost|\[?[0-9a-fA-F]*:[0-9a-fA-F:]+\]?)"
                             r"(?![\w.])")
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
# CalledProcessError ("returned non-zero exit status 137.").
_DEATH = re.compile(r"\bexitcode\s*[:=]\s*-(\d{1,2})\b|\breturn code = -(\d{1,2})\b"
                    r"|died with <Signals\.(SIG[A-Z]+): \d+>|terminated with signal (SIG[A-Z]+)"
                    r"|\bSignal (\d{1,2}) \(SIG[A-Z]+\) received by PID"
                    r"|non-zero exit status (1[2-9]\d)\b")
# The MPI launchers' reports of a rank a signal ended, its number in "signum" (end_lines.py's
# grammars): Open MPI's "... exited on signal 9 (Killed).", MPICH's (and Intel MPI's) hydra "YOUR
# APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)"
_MPI_DEATHS = (re.compile(OPEN_MPI_SIGNALED), re.compile(hydra_exit(r"[^\n(]{0,80}?")))
# the launchers' "Exit code: %d" of the first process that exited non-zero, alone on its line
# (end_lines.FIRST_FAILED_CODE): a signal as a negative code, or as the shell's 128+N
_EXIT_CODE_LINE = re.compile(FIRST_FAILED_CODE)
# bash's report of a job a signal ended, alone on its line (jobs.c: strsignal(), "Killed" for
# SIGKILL, "Bus error" for SIGBUS..., after the script's "line N: <pid> " or the job's "[1]+ ",
# "(core dumped)" after it if it dumped core); the kernel's "Killed process N" is not it
_SHELL_SIGNALS = {"Killed": "SIGKILL", **FATAL_SIGNALS}
_SHELL_DEATH = re.compile(SHELL_PREFIX + r"(?:\S+: line \d+: +\d+ +|\[\d+\][+-]? +)?("
                          + "|".join(_SHELL_SIGNALS) + r")(?! +process \d)(?: \(core dumped\))?"
                          r"(?: +\S[^\n]*)?\s*$")
# Slurm's srun on the tasks a signal ended ("srun: error: %s: task(s) %s: %s", strsignal's words,
# "Killed" for SIGKILL; " (core dumped)" after them when the task dumped core)
_SRUN_DEATH = re.compile(SRUN_TASKS + "(" + "|".join(_SHELL_SIGNALS) + r")\b")
# zsh's report of the same, its words in lower case after "zsh: " (end_lines.ZSH_SIGNALS)
_ZSH_DEATH = re.compile(zsh_report("|".join(ZSH_SIGNALS)))
# a process selecting its GPU, in a traceback's lines or the failing check's own: torch's
# torch.cuda.set_device (its frame's source line, and torch._C._cuda_setDevice under it), a
# ``.cuda(local_rank)``, torch 1.x's THCudaCheck in torch/csrc/cuda/Module.cpp
_SELECT = re.compile(r"\b(set_device|_cuda_setDevice|cudaSetDevice)\("
                     r"|(\.cuda)\([^()\n]*local_rank|(torch/csrc/cuda/Module\.cpp)")


def _deaths(text: str) -> list[Fact]:
    found: list[Fact] = []
    for match in _DEATH.finditer(text):
        minus, deepspeed, python, spawn, summary, status = match.groups()
        number = int(minus or deepspeed or summary or 0) or (
            int(status) - 128 if status else SIGNAL_NUMBERS.get(python or spawn or "", 0))
        if number in SIGNALS:
            found.append(Fact(FactKind.DEATH, SIGNALS[number],
                              BEFORE_TEARDOWN if deepspeed else str(number)))
    for mpi in _MPI_DEATHS:
        for reported in mpi.finditer(text):
            number = int(reported.group("signum"))
            if number in SIGNALS:
                found.append(Fact(FactKind.DEATH, SIGNALS[number], str(number)))
    first_failed = _EXIT_CODE_LINE.match(text)
    if first_failed is not None:
        code = int(first_failed.group("code"))
        number = -code if code < 0 else code - 128 if code > 128 else 0
        if number in SIGNALS:
            found.append(Fact(FactKind.DEATH, SIGNALS[number], str(number)))
    shell = _SHELL_DEATH.match(text) or _SRUN_DEATH.search(text)
    zsh = None if shell else _ZSH_DEATH.match(text)
    said = shell.group(1) if shell else ZSH_SIGNALS[zsh.group("zsh_signal")] if zsh else None
    if said is not None:
        name = _SHELL_SIGNALS[said]
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
        numbers += [int(first_group(m.groups())) for m in _ERRNO_NUMBER.finditer(text)]
    numbers += [number for name, number in ERRNO_BY_NAME.items() if name in text
                and any(m.group(1) == name for m in _ERRNO_NAME.finditer(text))]
    numbers += [n for t, n in ERRNO_BY_TEXT.items() if t in lowered]
    numbers += winsock_errnos(text)
    for number in dict.fromkeys(numbers):
        found.append(Fact(FactKind.ERRNO, str(number), ERRNOS.get(number, ("", ""))[0]))
    if "SIG" in text:
        found += [Fact(FactKind.SIGNAL, s) for s in dict.fromkeys(_SIGNAL.findall(text))]
    if "exit" in lowered:
        found += [Fact(FactKind.EXIT_CODE, first_group(m.groups())) for m in _EXIT.finditer(text)]
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
        found += [Fact(FactKind.NODE_RANK_CLAIM, rank, count)
                  for count, _procs, rank in DEEPSPEED_NODE.findall(text)[:1]]
    if "version" in lowered or "torch==" in text or "+cuda" in text:
        for whose, regex in _VERSIONS:
            found += [Fact(FactKind.VERSION, first_group(m.groups()), whose)
                      for m in regex.finditer(text)]
    if "addr" in lowered:
        for address in _MASTER_ADDRESS.findall(text)[:1]:
            kind = address_class(address)
            if kind is not None:
                found.append(Fact(FactKind.MASTER_ADDRESS, address.strip("[]"), kind.value))
    if "addr" in lowered or "host" in text:
        for match in _HOSTNAME.finditer(text):
            name = first_group(match.groups())
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
            word in text for word in _SHELL_SIGNALS) or "zsh: " in text:
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
        found += [Fact(FactKind.SHM_AVAILABLE, m) for m in network.SHM_AVAILABLE.findall(text)]
    if "completion with error" in text:
        found += [Fact(FactKind.RDMA_ERROR, m) for m in network.RDMA_ERROR.findall(text)]
    if "evice(" in text or ".cuda(" in text or "Module.cpp" in text:
        found += [Fact(FactKind.DEVICE_SELECT, first_group(m.groups())) for m in _SELECT.finditer(text)]
    found += statement_facts(text)
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
