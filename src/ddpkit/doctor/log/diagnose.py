"""``ddpkit doctor --log``: read log files (or stdin) and diagnose them. No torch import."""

from __future__ import annotations

import os
import select
import stat
from collections.abc import Sequence
from typing import BinaryIO

from ddpkit.doctor.findings import Finding, has_errors
from ddpkit.doctor.log import run_dir
from ddpkit.doctor.log.kinds import EventKind
from ddpkit.doctor.log.log_bytes import UnreadableFormat
from ddpkit.doctor.log.rank_ends import run_ends
from ddpkit.doctor.log.refusal import unreadable
from ddpkit.doctor.log.rules.table import Diagnosis
from ddpkit.doctor.log.scan import Event, scan
from ddpkit.doctor.log.verdict import NodeLogs, Verdict, judged, read_node, use
from ddpkit.i18n import _

STDIN_NAME = "<stdin>"
FIFO_WAIT_S = 10  # how long a FIFO given as a log may stay without a writer
KERNEL_FILES = ("/proc/", "/sys/")  # files the kernel makes up as they are read: not logs


def check_readable(path: str) -> None:
    """Raise ``log-unreadable`` unless ``path`` is a file (or a FIFO) this process can read."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise unreadable(path, exc.strerror or str(exc)) from exc
    if stat.S_ISDIR(mode):
        raise unreadable(path, _("it is a directory, and neither a ddpkit run directory (no "
                                 "{launcher_log} in it) nor torchrun's --log-dir (no "
                                 "attempt_N/<rank>/stderr.log in it or a folder below)",
                                 launcher_log=run_dir.LAUNCHER_LOG),
                         fix=_("pass the log files in it: ddpkit doctor --log {path}/*.log",
                               path=path.rstrip("/")))
    if stat.S_ISFIFO(mode):
        return  # opened without waiting for a writer when it is read (_open_log)
    if not stat.S_ISREG(mode):
        raise unreadable(path, _("it is a device or a socket, not a log file"),
                         fix=_("pass a log file, or pipe the output into stdin: "
                               "<command> 2>&1 | ddpkit doctor --log -"))
    if os.path.realpath(path).startswith(KERNEL_FILES):
        raise unreadable(path, _("it is one of the kernel's files under /proc or /sys, not a "
                                 "log file: some never end (/proc/kmsg waits for the kernel's "
                                 "next message, and reading it takes the messages away from "
                                 "the system log)"),
                         fix=_("save what you want read to a file first (e.g. `dmesg > "
                               "kernel.log`) and pass that file"))
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise unreadable(path, exc.strerror or str(exc)) from exc


def _open_log(path: str) -> BinaryIO:
    """``path`` opened for reading. A FIFO is opened without waiting for a writer; one that no
    program writes into within FIFO_WAIT_S is an error, not a wait forever."""
    if not stat.S_ISFIFO(os.stat(path).st_mode):
        return open(path, "rb")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # returns at once, writer or not
    poller = select.poll()
    poller.register(fd, select.POLLIN)  # Linux: no event until a writer writes or closes
    if not poller.poll(FIFO_WAIT_S * 1000):
        os.close(fd)
        raise unreadable(path, _("it is a FIFO that no program wrote into within {wait} s",
                                 wait=FIFO_WAIT_S),
                         fix=_("start the program that writes into it first, or pass the log "
                               "file itself"))
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def diagnose(paths: Sequence[str], stdin: BinaryIO | None = None) -> list[Finding]:
    """Findings for the logs at ``paths`` (``-`` is ``stdin``), most likely root cause first."""
    return list(read_verdict(paths, stdin).findings)


def read_verdict(paths: Sequence[str], stdin: BinaryIO | None = None) -> Verdict:
    """The findings for the logs at ``paths`` (``-`` is ``stdin``), most likely root cause
    first, and the failed rank that started it (from the run directories' ranks' ends).

    Every path is checked before any is read, so a typo fails at once. A ddpkit run directory
    is read as a launch's node reads its own for the master's summary (verdict.read_node: the
    same lines, the same bounds); other files are streamed one after another in constant memory;
    all is correlated at the end.
    """
    from ddpkit.doctor.log import flight_recorder as flight_recorder_input
    from ddpkit.doctor.log import stack_dumps as stacks_input

    stack_files, paths = stacks_input.split(list(paths))
    dumps, paths = flight_recorder_input.split(paths)
    # the stacks say where each rank was, the flight recorder which collective it reached: the
    # most direct evidence, ahead of what the logs show
    from_stacks = stacks_input.finding(stack_files)
    hung = [*([from_stacks] if from_stacks is not None else []),
            *flight_recorder_input.findings(dumps)]
    if (stack_files or dumps) and not paths:
        return Verdict(tuple(hung), None)
    given_dirs = list(dict.fromkeys(p for p in paths if p != "-" and run_dir.is_run_dir(p)))
    # a run's launcher log given alone stands for its run directory: its ranks' ends are read
    # all the same (the log itself is streamed as any other file)
    alone = [os.path.dirname(p) or "." for p in paths if p != "-" and os.path.basename(p) ==
             run_dir.LAUNCHER_LOG and run_dir.is_run_dir(os.path.dirname(p) or ".")]
    real_given = {os.path.realpath(d) for d in given_dirs}
    alone = list(dict.fromkeys(d for d in alone if os.path.realpath(d) not in real_given))
    # torchrun's own --log-dir (or one start's folder in it) stands for its ranks' logs
    files = [f for p in paths if p not in given_dirs
             for f in (run_dir.torchrun_log_dir_logs(p) if p != "-" else []) or [p]]
    for path in [*run_dir.expand(given_dirs), *files]:
        if path != "-":
            check_readable(path)
    nodes = [read_node(d) for d in given_dirs]
    nodes += [NodeLogs(d, tuple(ends), first, ()) for d in alone
              for ends, first in [run_ends(d)]]
    diagnosis = Diagnosis()
    use(diagnosis, nodes)
    silent = run_dir.silent_rank_logs(files)
    for path in files:
        if path in silent:  # (an empty file: nothing to scan, and that is the fact)
            diagnosis.feed(Event(EventKind.SILENT_RANK_LOG, path, 0, "", None, None, None,
                                 {"local_rank": str(silent[path])}))
            continue
        if path == "-":
            if stdin is None:
                raise unreadable(path, _("no standard input"))
            _feed(diagnosis, stdin, STDIN_NAME, path)
            continue
        try:
            with _open_log(path) as stream:
                _feed(diagnosis, stream, path, path)
        except OSError as exc:
            raise unreadable(path, exc.strerror or str(exc)) from exc
    found = diagnosis.findings()
    if hung:
        found = [*hung, *(f for f in found
                          if f.id not in ("no-failure", "no-result") or not has_errors(hung))]
    return judged(found, nodes)


def _feed(diagnosis: Diagnosis, stream: BinaryIO, name: str, path: str) -> None:
    try:
        for event in scan(stream, name):
            diagnosis.feed(event)
    except UnreadableFormat as exc:
        raise unreadable(path, str(exc), fix=exc.fix) from exc
    except OSError as exc:
        raise unreadable(path, exc.strerror or str(exc)) from exc
