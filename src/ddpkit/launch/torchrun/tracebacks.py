"""The Python exception a rank died of, read from what it printed (pure: lines in, data out).

torchrun's own ``ChildFailedError`` report says only that a child failed; the rank's stderr has the
traceback that says why. This finds its last traceback, the exception line that ends it, and the
innermost frame that is the user's (not torch's, not the standard library's), and skips warnings
(torch's "Failed to initialize NumPy" UserWarning is not a cause).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ddpkit.i18n import _

# CPython's first line of an exception's report (Lib/traceback.py), wherever a traceback is read
TRACEBACK_HEAD = "Traceback (most recent call last):"
# CPython's unraisable hook's first words (Python/errors.c), before the traceback of an exception
# it could not raise and ignored (doctor/log/rules/ignored.py)
IGNORED_HEAD = "Exception ignored in"
# A Python exception's type as a traceback's last line prints it (Lib/traceback.py,
# format_exception_only: the class's qualified name): a class name ending in Error or Exception
# ("RuntimeError", "torch.distributed.DistBackendError"), or a module's class named just that
# ("wandb.errors.Error"), or the builtin Exception itself (``raise Exception(...)``, printed bare).
# The doctor's scan, facts and rules read it so.
EXCEPTION_TYPE = (r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)"
                  r"|(?:[A-Za-z_]\w*\.)+(?:Error|Exception)|(?<![\w.])Exception")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure|Warning)"
                        r"|[A-Za-z_][\w.]*\.[A-Z]\w*)(?::\s?(?P<message>.*))?$")
_LIBRARY_PARTS = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen ")
_WRAPPERS = ("ChildFailedError", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError")
# A launcher's report that a process it started failed, not a failure of its own (an exception
# type's last part): torchrun's agent's ChildFailedError, torch.multiprocessing.spawn's
# ProcessRaisedException and ProcessExitedException
LAUNCHER_REPORTS = frozenset({"ChildFailedError", "ProcessRaisedException",
                              "ProcessExitedException"})
# the exceptions a process raises when it is stopped (Ctrl-C, sys.exit, torchrun's signal
# handler): the stop, never the process's own failure
INTERRUPTS = frozenset({"KeyboardInterrupt", "SystemExit", "SignalException"})
# torchrun (and Python's logging) put a prefix before each line: "[rank0]: ", "[default0]:".
_PREFIX = re.compile(r"^(?:\[(?:rank|default)?\d+\]:\s?)+")


@dataclass(frozen=True)
class PythonException:
    type: str  # "RuntimeError", "torch.distributed.DistBackendError"
    message: str
    file: str | None = None  # the innermost user frame
    line: int | None = None
    function: str | None = None

    def where(self) -> str:
        if self.file is None:
            return ""
        short = self.file.rsplit("/", 1)[-1]
        return f"{short}:{self.line}" + (f" in {self.function}" if self.function else "")

    def __str__(self) -> str:
        text = f"{self.type}: {self.message}" if self.message else self.type
        return f"{text} (at {self.where()})" if self.file else text

    def to_dict(self) -> dict[str, object]:
        return {"type": self.type, "message": self.message, "file": self.file, "line": self.line,
                "function": self.function, "text": str(self)}


def _is_library(path: str) -> bool:
    return any(part in path for part in _LIBRARY_PARTS) or "/torch/" in path


def last_exception(lines: Iterable[str]) -> PythonException | None:
    """The exception that ended the last traceback in ``lines`` (torchrun's wrapper skipped)."""
    found: PythonException | None = None
    frames: list[tuple[str, int, str]] = []
    inside = False
    for raw in lines:
        line = _PREFIX.sub("", raw.rstrip("\n"))
        if line.strip() == TRACEBACK_HEAD:
            inside, frames = True, []
            continue
        if not inside:
            continue
        frame = _FRAME.match(line)
        if frame:
            frames.append((frame["file"], int(frame["line"]), frame["func"]))
            continue
        if line.startswith((" ", "\t")) or not line.strip():
            continue  # a frame's source line, or the blank line in a chained traceback
        match = _EXCEPTION.match(line.strip())
        inside = False
        if match is None or match["type"].rsplit(".", 1)[-1] in _WRAPPERS:
            continue
        user = [f for f in frames if not _is_library(f[0])]
        innermost = (user or frames)[-1] if frames else None
        found = PythonException(match["type"], (match["message"] or "").strip(),
                                *(innermost if innermost else (None, None, None)))
    return found


def common_exception(per_rank: Sequence[PythonException | None]) -> PythonException | None:
    """The one exception every failed rank died of, when they all agree on type and message."""
    if not per_rank or any(e is None for e in per_rank):
        return None
    first = per_rank[0]
    assert first is not None
    if all(e is not None and (e.type, e.message) == (first.type, first.message) for e in per_rank):
        return first
    return None


_WARNING = re.compile(r"^\S.*:\d+: [A-Z]\w*Warning: ")


def without_warnings(lines: Iterable[str]) -> list[str]:
    """``lines`` less Python warnings (``file.py:368: UserWarning: ...``) and the source line that
    Python prints under each."""
    kept: list[str] = []
    skip_source = False
    for line in lines:
        bare = _PREFIX.sub("", line)
        if _WARNING.match(bare):
            skip_source = True
            continue
        if skip_source and bare.startswith((" ", "\t")):
            skip_source = False
            continue
        skip_source = False
        kept.append(line)
    return kept


_MISSING_MODULE = re.compile(r"No module named '?(?P<name>[\w.]+)'?")


def known_fix(raised: PythonException) -> str | None:
    """The fix for the few exceptions whose cause the message alone names."""
    if raised.type.endswith("ModuleNotFoundError"):
        found = _MISSING_MODULE.search(raised.message)
        if found:
            top = found["name"].split(".")[0]
            return _("install {module} for the Python that runs the ranks on every node "
                     "(`pip install {module}`)", module=top)
    if "Numpy is not available" in raised.message:
        return _("install numpy for the Python that runs the ranks on every node "
                 "(`pip install numpy`)")
    return None


# torch 2.x with Gloo: a Gloo worker thread that releases the last collective's work while Python
# is shutting down takes the GIL, is ended by the interpreter, and the C++ runtime aborts. The rank
# has finished its work by then. Seen here with torch 2.13 on CPU in about 1 run in 12 of a
# 4-rank DDP script under load; described in pytorch/pytorch PR 179291 (2026).
EXIT_ABORT_LINE = "terminate called without an active exception"


def exit_abort_fix(stderr_lines: Sequence[str], exitcode: int) -> str | None:
    """The fix when a rank died of SIGABRT with the C++ runtime's exit-time abort line."""
    if exitcode != -6 or not any(EXIT_ABORT_LINE in line for line in stderr_lines):
        return None
    return _("the rank aborted while Python was shutting down: a Gloo thread still held the last "
             "collective's work (a torch/Gloo problem, most often with a DDP model alive at "
             "exit); in the script, free the model and call gc.collect() before "
             "dist.destroy_process_group() (`del model, optimizer; gc.collect()`)")
