"""The quiet tail (issue 24): a log whose anchored scan showed no failure and no end of the run has
its last lines read whole, so that a failure line no anchor catches, and a log ddpkit recognises
nothing of, never end in "no failure".

Each of the last ``QUIET_LINES`` lines (at most ``QUIET_BYTES``) the scan made no event of is
read against:

- the message catalogue (``messages.json``, built from NCCL's, Gloo's and torch's sources): a
  line that prints a catalogued error template is a failure line, whatever prefix it was posted
  with; any catalogued line, of any level, is a line ddpkit recognises;
- NCCL's WARN line as its ``debug.cc`` formats it (``<file>:<line> NCCL WARN <text>``), posted
  without the host prefix or the ``NCCL`` word;
- ``OTHER_FAILURES``: the failure lines of other programs that distributed runs' logs carry,
  each from that program's own format (below; the shell's report of a crash and the end markers
  are the tail pass's, patterns.py);
- ``STAGES``: lines that show a stage of a run, of programs the scan's patterns do not read;
- ``TOPOLOGY_ROW``: ``nvidia-smi topo -m``'s matrix, about the machine, not the run;
- ``PYTHON_WARNING``, ``C10_WARNING``: a warning in Python's or c10's own format, a line ddpkit
  recognises by its level (a warning, not a failure) though the catalogue does not hold its text.

A catalogued line printed at warning level whose template the catalogue files under a cause (c10d's
"The server socket on %s has timed out, will retry.") is a ``catalogued-warning``: the log shows
that cause's symptom, and no failure, so it is at most a warning (issue 30).

It yields those lines as events, and one ``log-read`` event per log: how many lines the log has,
how many were read here, and how many ddpkit recognised (the scan's events included).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ddpkit.doctor.catalogue import CATALOGUE, GENERIC
from ddpkit.doctor.findings import clip
from ddpkit.doctor.log.facts.printed import LIGHTNING_INIT, LIGHTNING_REGISTERED
from ddpkit.doctor.log.messages import catalogue
from ddpkit.doctor.log.prefixes import LAUNCHER_TAGS, RAY_TAG_UNNAMED, after_tags, log_line
from ddpkit.doctor.log.tail import LINE_WINDOW, Kept
from ddpkit.launch.torchrun.torch_log import glog_header
from ddpkit.launch.torchrun.tracebacks import TRACEBACK_HEAD

QUIET_LINES = 2000  # the last lines read whole
QUIET_BYTES = 256 << 10
# A file and line, as C/C++ sources print their own (__FILE__, __LINE__).
_SOURCE = r"[\w./-]{1,256}\.(?:c|cc|cpp|cu|cuh|h|hpp)"
# NCCL's WARN (src/debug.cc: "%s:%d:%d [%d] %s:%d NCCL WARN %s"), quoted from the file name on and
# without the NCCL word ("include/socket.h:344 WARN Socket creation failed : ...").
NCCL_WARN = re.compile(rf"(?:^|\s){_SOURCE}:\d+ (?:NCCL )?WARN (?P<detail>\S[^\n]*)")
OTHER_FAILURES: tuple[re.Pattern[str], ...] = (
    # NVSHMEM's error macros (NVSHMEMI_NZ_ERROR_JMP and its kin: "%s:%d: non-zero status: %d"),
    # the code a failed call returned, with where it failed
    re.compile(rf"(?P<detail>{_SOURCE}:\d+: non-zero status: -?[1-9]\d*[^\n]*)"),
    # systemd's `systemctl status` of a unit that failed ("Active: failed (Result: exit-code)"):
    # a service the GPUs need (nvidia-fabricmanager, nvidia-persistenced) not running
    re.compile(r"(?P<detail>\bActive: failed\b[^\n]*)"),
)
# The launchers whose messages the catalogue holds (tools/catalogue_messages.py --add): their lines
# below error level report the run's start (its hosts, the processes spawned), a stage of it.
LAUNCHERS = frozenset({"deepspeed", "horovod"})
# Lines that show a stage of a run, of programs whose stages the scan's patterns do not read
# (``run-stage`` events, their ``stage`` field saying which; rules/run_end.py words it).
STAGES: tuple[tuple[re.Pattern[str], str], ...] = (
    # nccl-tests' table of ranks ("#  Rank %2d Group %2d Pid %6d on %10s device %2d [0x%02x] %s";
    # before 2.10 without the group), here without the "# Using devices" line the scan follows
    (re.compile(r"^\s*#?\s*Rank\s+\d+ (?:Group\s+\d+ )?Pid\s+\d+ on \S+ device\s+\d+ \["),
     "nccltests-ranks"),
    # nccl-tests' result rows (common.cu: "%12li  %12li  %8s  %6s  %6i", then time, algbw, busbw
    # and #wrong, out-of-place and in-place): one collective ran at that size
    (re.compile(r"^\s*(?P<size>\d+)\s+\d+\s+(?:u?int(?:8|32|64)|half|float|double|bfloat16|"
                r"f8e4m3|f8e5m2)\s+(?:sum|prod|max|min|avg|mulsum|none)\s+-?\d+\s+[\d.]+\s"),
     "nccltests-results"),
    # PyTorch Lightning's device report as the Trainer sets up (trainer/setup.py: "GPU available:
    # {}, used: {}"), after a logger's or Ray's prefix; its process group's init, where the
    # processes wait for every member, then its rank 0 saying they all came (facts/printed.py)
    (re.compile(rf"^(?:{RAY_TAG_UNNAMED}|\S+: ?)?GPU available: \w+"), "lightning-setup"),
    (re.compile(LIGHTNING_INIT), "lightning-init"),
    (re.compile(LIGHTNING_REGISTERED), "lightning-registered"),
    # ProcessGroupGloo's report once its mesh is up (LOG(INFO): "[Gloo] Rank " << rank << " is
    # connected to " << n << " peer ranks. Expected number of connected peer ranks is : " << m)
    (re.compile(r"\[Gloo\] Rank \d+ is connected to \d+ peer ranks"), "gloo-connected"),
    # c10d's store socket (torch/csrc/distributed/c10d/socket.cpp, C10D_INFO, torch 1.13 on):
    # "The client socket has connected to %s on %s." and "The server socket has started to listen
    # on %s.": a process reached the rendezvous store, the first thing a distributed run does
    (re.compile(r"\bThe (?:client socket has connected to (?P<peer>\S{1,300}) on|server socket "
                r"has started to listen on) "), "c10d-store"),
    # ... and its warning where it names a socket's peer whose host name does not resolve
    # (formatSockAddr's getnameinfo failing, torch 2.x: "The hostname of the client socket cannot
    # be retrieved. err=%d"), printed as a store or peer socket connects: the same stage
    (re.compile(r"\[c10d\] The hostname of the client socket cannot be retrieved"), "c10d-store"),
    # torchrun's agent waiting for the other nodes: elastic/agent/server/api.py (torch 1.9 on,
    # "[%s] Rendezvous'ing worker group") and the c10d rendezvous (elastic/rendezvous/
    # dynamic_rendezvous.py: "The node '%s' attempts to join the next round of the rendezvous
    # '%s'.", "The node '%s' has joined round %s of the rendezvous '%s' as rank %s in a world of
    # size %s.")
    (re.compile(r"Rendezvous'ing worker group|attempts to join the next round of the "
                r"rendezvous|has joined round \d+ of the rendezvous"), "elastic-rendezvous"),
    # init_process_group's store-based barrier (distributed_c10d.py, _store_based_barrier:
    # "Added key: %s to store for rank: %s", info in torch 1.x, debug in 2.x)
    (re.compile(r"\bAdded key: store_based_barrier_key:\S+ to store for rank: \d+"),
     "c10d-barrier"),
    # ... and every rank past it ("Rank %s: Completed store-based barrier for key:%s with %s
    # nodes.", info in torch 1.x): init_process_group returned, the process group is up
    (re.compile(r"\bCompleted store-based barrier for key:\S+ with \d+ nodes"),
     "c10d-barrier-done"),
    # CPython's report of an exception ("Traceback (most recent call last):", then its frames),
    # here without the exception's own line after it (the scan reads that line as a failure):
    # a process failed, and the line that says how is not in the log
    (re.compile(r"^(?:\S+\s)?" + re.escape(TRACEBACK_HEAD)), "traceback"),
    # ProcessGroupNCCL's barrier() guessing the GPU of a process that named none
    # (ProcessGroupNCCL.cpp, torch 1.8 on: "Rank %d using GPU %d to perform barrier as devices
    # used by this process are currently unknown. This can potentially cause a hang if this rank
    # to GPU mapping is incorrect."; "using best-guess GPU" in some releases; from 2.4 after the
    # group's "[PG ID ...]" prefix): a rank entered a barrier, which waits for every rank
    (re.compile(r"\busing (?:best-guess )?GPU \d+ to perform barrier as devices used by this "
                r"process are currently unknown"), "nccl-barrier"),
    # PaddlePaddle's NCCL context init (imperative/nccl_context.cc, VLOG(0): "init nccl context
    # nranks: " << nranks << " local rank: " ...)
    (re.compile(r"\binit nccl context nranks: \d+ local rank: \d+"), "paddle-nccl-init"),
)
# Warnings in their printers' own formats: a warning by its format, which no failure is.
# - Python's (warnings.formatwarning: "%s:%s: %s: %s" of the file, the line, the category's
#   name and the message, the source line indented under it), torch's own Python code among them
#   and its C++ warnings once Python's handler turns them into Python's;
# - c10's (c10/util/Exception.cpp, WarningHandler::process: LOG_AT_FILE_LINE(WARNING, file,
#   line) << "Warning: " << msg << " (function " << func << ")", behind glog's "[W" prefix: the
#   date and time from torch 2.2, a pid in some releases, torchrun's "[rank0]:" before it), the
#   TORCH_WARNs printed where no Python handler is (a destructor at exit, a C++ thread).
PYTHON_WARNING = re.compile(r"^.{0,400}?\.py:\d+: (?P<warning>[A-Z]\w{0,60}Warning: .*)")
C10_WARNING = re.compile(glog_header("W") + r" (?P<warning>Warning: .*)")
# `nvidia-smi topo -m`'s matrix, a row per GPU: how it reaches each GPU (its legend: X itself,
# NV# NVLinks, PIX at most one PCIe bridge, PXB several, PHB a PCIe host bridge, NODE host bridges
# within a NUMA node, SYS across NUMA nodes). Not a run's line: a ``gpu-topology`` event that
# rules/run_end.py quotes when nothing else in the log is known.
TOPOLOGY_ROW = re.compile(r"^\s*GPU(?P<gpu>\d{1,4})\s+(?P<links>(?:(?:X|SYS|NODE|PHB|PXB|PIX|NV\d+)"
                          r"(?:\s+|$))+)")
# c10's backtrace of an exception, printed after its message (c10/util/Exception.cpp: "Exception
# raised from %s at %s:%d (most recent call first):", then a frame a line, "frame #%d: ..."
# (c10/util/Backtrace.cpp) or a symbolizer's "# %d  ..."): part of the message before it, never
# the failure's own words; a log ending in one ends on that message
C10_BACKTRACE = re.compile(rf"^{LAUNCHER_TAGS}\s*(?:Exception raised from \S+ at \S+ "
                           r"\(most recent call first\)|frame #\d+: \S|# ?\d+ +\S)")
QuietEvent = tuple[str, int, str, dict[str, str]]  # (kind, line number, text, fields)


def last_lines(kept: Kept) -> list[tuple[int, bytes]]:
    """(line number, bytes) of the log's last lines: at most QUIET_LINES and QUIET_BYTES."""
    found: list[tuple[int, bytes]] = []
    budget = QUIET_BYTES
    for buf, limit, first_line in reversed(kept):
        start = max(0, limit - budget)
        if start:
            newline = buf.find(b"\n", start - 1, limit)
            start = limit if newline < 0 else newline + 1
        lines = buf[start:limit].split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
        number = first_line + buf.count(b"\n", 0, start)
        found[:0] = [(number + i, line[:LINE_WINDOW]) for i, line in enumerate(lines)]
        budget -= limit - start
        if budget <= 0 or start or len(found) >= QUIET_LINES:
            break
    return found[-QUIET_LINES:]


def read_quiet(kept: Kept, seen: set[int], scanned: int, total_lines: int
               ) -> Iterator[QuietEvent]:
    """The failure and stage lines among the log's last lines that the scan made no event of (``seen``:
    the numbers of the lines it did), then the ``log-read`` event. ``scanned``: how many events
    the scan yielded."""
    recognised = scanned
    read = 0
    last: tuple[int, str] | None = None  # the log's last line, when ddpkit does not know it
    after_known = False  # the line before is one ddpkit knows (not a continuation of one)
    for number, raw in last_lines(kept):
        if number in seen:
            last, after_known = None, True
            continue
        whole = log_line(raw)  # (its indent read after any colour codes before it)
        text = whole.strip()
        if not text:
            continue
        read += 1
        own_line = after_tags(whole)  # (as its process printed it: a launcher's tags off)
        own = own_line.strip() if own_line != whole else text
        if C10_BACKTRACE.match(own) is not None:
            recognised += 1  # (the message before it stays the log's last line, known or not)
            continue
        # an indented line right after a known one continues it (Python's warnings print one
        # source line under the warning, "  warnings.warn(...)"; a traceback's frame, its code);
        # a second one does not (a progress bar's "  0%|...", whatever printed it)
        continued = after_known and own_line[:1] in (" ", "\t")
        last, after_known = None, False
        row = TOPOLOGY_ROW.match(text)
        if row is not None:  # a table about the machine, not a line of a run
            yield "gpu-topology", number, clip(text), {"gpu": row.group("gpu"),
                                                       "links": " ".join(row.group("links").split())}
            continue
        found = _recognise(text)
        if found is None and own != text:
            found = _recognise(own)
        if found is not None:
            recognised += 1
            after_known = True
            if found[0]:
                yield found[0], number, clip(text), found[1]
        elif not continued:
            last = (number, clip(text))
    fields = {"lines": str(total_lines), "read": str(read), "recognised": str(recognised)}
    if last is not None:  # (a failed run's log ends with its failure, in its program's words)
        fields.update(last_line=str(last[0]), last_text=last[1])
    yield "log-read", total_lines, "", fields


def _recognise(text: str) -> tuple[str, dict[str, str]] | None:
    """(event kind, fields) when ``text`` is a failure line or a stage of a run; ("",
    {}) when it is another line ddpkit recognises (a catalogued message of any level); None
    otherwise."""
    for pattern, stage in STAGES:
        found = pattern.search(text)
        if found is not None:
            return "run-stage", {"stage": stage, **found.groupdict()}
    warn = NCCL_WARN.search(text)
    if warn is not None:
        return "nccl-warn", {"detail": warn.group("detail")}
    for pattern in OTHER_FAILURES:
        found = pattern.search(text)
        if found is not None:
            return "failure-line", {"detail": found.group("detail")}
    message = catalogue().match(text)
    if message is None:
        return _warning(text)
    if message.error:
        return "failure-line", {"detail": text}
    if message.source in LAUNCHERS:  # a launcher's report as it starts the run's processes
        return "run-stage", {"stage": "launcher", "program": message.source}
    if message.source == "nccl" and message.level == "info":  # NCCL at work on a communicator
        return "run-stage", {"stage": "nccl-info", "file": message.file}
    if message.level == "warning" and message.maps in CATALOGUE and message.maps not in GENERIC:
        return "catalogued-warning", {"maps": message.maps}
    if message.level == "warning":  # a catalogued warning of no cause: a warning all the same
        return _warning(text) or ("warning-line", {"format": message.source, "warning": text})
    return "", {}


def _warning(text: str) -> tuple[str, dict[str, str]] | None:
    """A ``warning-line`` event's (kind, fields) when ``text`` is a warning in Python's or c10's
    format: the format's name, and the warning from its category or its "Warning:" on."""
    for printer, pattern in (("python", PYTHON_WARNING), ("c10", C10_WARNING)):
        warned = pattern.search(text)
        if warned is not None:
            return "warning-line", {"format": printer, "warning": warned.group("warning")}
    return None
