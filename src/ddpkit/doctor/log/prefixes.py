"""Where a log line came from, as its prefixes say: the NCCL ``host:pid:tid [dev]`` prefix, a
launcher's ``[node1:0]`` / ``[rank3]:`` / mpirun's ``[1,3]<stdout>:`` tags, srun's and pdsh's
labels, Ray's ``(Actor pid=N, ip=A)``, around timestamps and glog headers."""

from __future__ import annotations

import re

from ddpkit.launch.torchrun.torch_log import glog_header
from ddpkit.launch.torchrun.tracebacks import EXCEPTION_TYPE
from ddpkit.plain_text import line_text

_NCCL_PREFIX = re.compile(r"(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] ")
# A date and time before the line: logging's asctime ("2024-10-11 20:10:11,640"), ISO 8601, and
# RFC 3339 with nanoseconds, which `kubectl logs --timestamps` and `docker logs --timestamps` put
# before every line ("2024-10-11T20:10:11.640908017Z ")
STAMP = r"\[?\d{4}-\d\d-\d\d[ T_][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?\]?\s?"
_STAMP = re.compile(STAMP)
# A log collector's time stamp before every line: `kubectl logs --timestamps` and `docker logs
# --timestamps` write RFC 3339 with nanoseconds ("2024-10-11T20:10:11.640908017Z "), and the
# container runtime's own log files (the CRI logging format, /var/log/pods/...) the same, then
# the stream and "F" for a full line or "P" for a part ("... stderr F "). It is not the
# program's own line, so every line is read without it (a program's own stamps stay).
_COLLECTOR = (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d) "
              r"(?:std(?:out|err) [FP] )?")
_COLLECTOR_STAMP = re.compile(_COLLECTOR)
COLLECTOR_STAMPS = re.compile(b"(?m)^" + _COLLECTOR.encode())  # every line's, in a buffer
_GLOG = re.compile(glog_header(timed=True) + r"\s?")  # (a header without a time is the same)
# A launcher's tag before a line: torchrun's "[rank3]:" and "[default0]:", DeepSpeed's "[node1:0]",
# mpirun's "[1,3]<stdout>:" (1-80 characters, no bracket or space inside); the one spelling of it
_TAG_TEXT = r"[^\[\]\s]{1,80}"
_STREAM = r"<std(?:out|err)>"
LAUNCHER_TAG = rf"\[{_TAG_TEXT}\](?:{_STREAM})?:?"
LAUNCHER_TAGS = rf"(?:\s*{LAUNCHER_TAG})*"  # (any number of them)
_TAG = re.compile(rf"\[(?P<tag>{_TAG_TEXT})\](?P<colon>(?:{_STREAM})?:)?\s?")
# (torch's excepthook writes f"[rank{rank}]: {line}", distributed_c10d.py; torchrun's agent its
# log_line_prefix_template, "[${role_name}${local_rank}]:", with no space after)
_TAGS_TEXT = rf"(?:\[rank\d+\]: |{LAUNCHER_TAG})*"
# torchrun's tee before a worker's line alone, "[${role_name}${local_rank}]:" (the default role
# "default"): not torch's "[rank3]:", which any launcher's workers print
TORCHRUN_TEE = re.compile(r"\s*\[(?!rank\d)[A-Za-z_][\w-]{0,60}?\d{1,4}\]:")
_TAGS = re.compile(_TAGS_TEXT)
_RANK_TAG = re.compile(r"rank(\d+)")
_NODE_TAG = re.compile(r"([A-Za-z][\w.-]*):(\d+)")
_MPI_TAG = re.compile(r"(\d+),(\d+)")
# Ray's driver prints each worker's and actor's output after "(pid=N)", "(pid=N, ip=A)" or
# "(ActorClass pid=N, ip=A)" (the ip only for another node's process), and vLLM's multiprocessing
# workers theirs after "(VllmWorkerProcess pid=N)" (multiproc_worker_utils._add_prefix): a
# launcher prefix.
# (RAY_TAG names its group: a regex may hold it once.)
RAY_TAG = r"\((?:[A-Za-z_][\w.-]{0,80} )?pid=\d+(?:, ip=(?P<ray_ip>[\w.:-]{1,64}))?\)\s?"
_RAY_TAG = re.compile(RAY_TAG)
RAY_TAG_UNNAMED = RAY_TAG.replace("(?P<ray_ip>", "(?:")  # (for a regex that names it elsewhere)
# pytest reports a failed test's exception with its fail marker before each of its lines: "E"
# and the failing source line's indent less one character (_pytest/_code/code.py,
# FormattedExcinfo.get_exconly: ``failindent = self.fail_marker + indent[1:]``, the indent 4 in a
# short traceback, else the source's own, at least 4 inside a test function): "E   RuntimeError:
# ...". The exception is the test process's failure, as if uncaught.
PYTEST_FAILURE = r"E {3,}"
# An exception as a traceback ends it: its type first, after the line's prefixes (a stamp, a
# launcher's tag or label, Ray's tag, then pytest's fail marker), or a traceback pasted onto one
# line (a frame's '", line N, in <function>' in CPython's format, its source line, then the
# exception); not an exception's name inside prose ("no ValueError: seen"). A message that starts
# with a line break leaves "<type>: " alone on its line, the message below it
# (traceback.format_exception_only: f"{stype}: {value}"; torch.multiprocessing's
# ProcessRaisedException, "\n\n-- Process %d terminated with the following error:\n..."), and a
# copy without its trailing space ends the line at the colon
_RAISED_TYPE = rf"(?:{EXCEPTION_TYPE}|(?:[A-Za-z_]\w*\.)*[A-Z]\w*Exit)"  # (and SystemExit's kin)
# a C library's result name, which torch prints as if it were an exception's type (NCCLUtils.cpp's
# detail line after an NCCL error: "ncclSystemError: System call ...")
_RESULT_NAME = r"[a-z]+[A-Z]\w*Error"


def _raised(names: str) -> re.Pattern[str]:
    return re.compile(rf"(?:^(?:{STAMP})*|[\]>:|]\s?|{RAY_TAG})\s*(?:{PYTEST_FAILURE})?(?:{names}):"
                      rf"(?: |\s*$)|\", line \d+, in [\w<>.]+ [^\n]*?(?<![\w.])(?:{names}): ")


_RAISED = _raised(_RAISED_TYPE)
_RAISED_OR_RESULT = _raised(f"{_RAISED_TYPE}|{_RESULT_NAME}")
# An exception raised without a message ("raise AssertionError", a bare ``assert``): Python prints
# its type alone (Lib/traceback.py, format_exception_only: the type's name, with no ": ", where
# str() of the exception is empty), after the line's prefixes only (stamps, launcher tags, Ray's


def raised(text: str, *, results: bool = False) -> bool:
    """Whether ``text`` is an exception's line as a traceback ends with it (a raise, not a quote),
    with its message or without one; with ``results``, a C library's result name printed in its
    place counts too."""
    return ((_RAISED_OR_RESULT if results else _RAISED).search(text) is not None
            or _BARE_RAISED.match(text) is not None)


# srun --label ("52: ") and pdsh ("node3: " / "10.0.0.3: ") put a bare label before the line.
_LABEL_TEXT = r"\d+|[A-Za-z0-9][\w.-]*"
_LABEL = re.compile(rf"(?P<label>{_LABEL_TEXT}): (?=\S)")
# (the same, whatever the line's own text starts with), or Docker Compose's service name before
# each line of `docker compose up` and `logs`, padded to the longest, then "| "
# ("trainer-1  | ", Compose v1 "proj_trainer_1  | ")
_COMPOSE_LABEL = r"(?P<service>[\w.-]{1,80}) +\| "
LINE_LABEL = rf"(?:(?:{_LABEL_TEXT}): |{_COMPOSE_LABEL.replace('?P<service>', '?:')})"
_LINE_LABEL = re.compile(LINE_LABEL)
# a launcher's label, then its tags: what after_tags takes off, to anchor a pattern at the start
# of a line's own text (its indent kept)
LINE_PREFIXES = rf"(?:{LINE_LABEL})?{_TAGS_TEXT}"
# either label, naming what it names: srun's task id, pdsh's host or Compose's service
_ANY_LABEL = re.compile(rf"{_LABEL.pattern}|{_COMPOSE_LABEL}")

# An exception raised without a message ("raise AssertionError", a bare ``assert``): Python prints
# its type alone (Lib/traceback.py, format_exception_only: the type's name, with no ": ", where
# str() of the exception is empty), after the line's prefixes only (a launcher's label, stamps,
# launcher tags, Ray's tag, pytest's fail marker): a line that is nothing but an exception's name
BARE_RAISED = (rf"^\s*(?:{LINE_LABEL})?(?:{STAMP}|{_TAG.pattern}|{RAY_TAG})*\s*"
               rf"(?:{PYTEST_FAILURE})?(?P<type>{EXCEPTION_TYPE}):?\s*$")  # (":": message below)
_BARE_RAISED = re.compile(BARE_RAISED)


# The part of a line every process and every moment prints differently: launcher tags, then
# glog's header or NCCL's "host:pid:tid [dev] " (the regexes above)
_HEADER = re.compile(rf"^{LAUNCHER_TAGS}\s*(?:{_GLOG.pattern}|{_NCCL_PREFIX.pattern})")


def without_header(text: str) -> str:
    """The line without the launcher tags and the glog header or NCCL prefix before its message
    (one regex: cheap enough for every line); the line itself when it has neither."""
    header = _HEADER.match(text)
    return text[header.end() :] if header else text


# NCCL's prefix after a launcher's label and tags
_NCCL_HEAD = re.compile(rf"^(?:{LINE_LABEL})?{LAUNCHER_TAGS}\s*{_NCCL_PREFIX.pattern}")


def nccl_prefix(text: str) -> tuple[str, str, str] | None:
    """(host, pid, CUDA device) of the NCCL prefix ``host:pid:tid [dev] `` at the start of a
    line (after a launcher's label and tags); None without one."""
    head = _NCCL_HEAD.match(text)
    return (head.group("host"), head.group("pid"), head.group("dev")) if head else None


def parse_prefix(text: str) -> tuple[str | None, str | None, int | None]:
    """(NCCL host, launcher node, global rank) from the prefixes at the start of a line."""
    host = node = None
    rank: int | None = None
    pos = 0
    for _ in range(8):
        while pos < len(text) and text[pos] == " ":
            pos += 1
        nccl = _NCCL_PREFIX.match(text, pos)
        if nccl:
            return nccl.group("host"), node, rank
        stamp = _STAMP.match(text, pos) or _GLOG.match(text, pos)
        if stamp:
            pos = stamp.end()
            continue
        ray = _RAY_TAG.match(text, pos)
        if ray:
            node = ray.group("ray_ip") or node
            pos = ray.end()
            continue
        tag = _TAG.match(text, pos)
        if not tag:
            label = _ANY_LABEL.match(text, pos) if pos == 0 else None
            if label is None or not _NCCL_PREFIX.match(text, label.end()):
                break  # only a label in front of an NCCL line: "RuntimeError: ..." is no label
            value = label.group("label") or label.group("service")
            if value.isdigit():
                rank = int(value)  # srun's task id: the global rank under srun
            else:
                node = value
            pos = label.end()
            continue
        value = tag.group("tag")
        if (found := _RANK_TAG.fullmatch(value)) is not None:
            rank = int(found.group(1))
        elif (found := _MPI_TAG.fullmatch(value)) is not None:
            rank = int(found.group(2))
        elif (found := _NODE_TAG.fullmatch(value)) is not None:
            node = found.group(1)
        elif not tag.group("colon"):
            break  # [c10d], [0]: part of the message, not a launcher prefix
        pos = tag.end()
    return host, node, rank


def log_line(raw: bytes) -> str:
    """One raw line of a log as the rules read it: as text (plain_text.line_text), without a
    log collector's time stamp before it."""
    text = line_text(raw)
    if text[:1].isdigit() and (stamp := _COLLECTOR_STAMP.match(text)) is not None:
        return text[stamp.end() :]
    return text


def after_tags(text: str) -> str:
    """``text`` after the launcher's label and tags before it (srun's "0: ", pdsh's "node3: ",
    "[rank0]:", "[default0]:"), its own indent kept: the line as the process printed it."""
    label = _LINE_LABEL.match(text)
    if label is not None:
        text = text[label.end() :]
    tags = _TAGS.match(text) if text[:1] == "[" else None
    return text[tags.end() :] if tags is not None else text
