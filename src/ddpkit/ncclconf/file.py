"""nccl.conf as NCCL reads it: parse, render byte-for-byte, edit in place, and point out bad lines.

NCCL's reader (``setEnvFile`` in NCCL's ``param.cc``) takes each line up to ``\\n``; a line whose
first character is ``#`` is skipped; a line without ``=`` is skipped; otherwise the name is
everything before the first ``=`` and the value everything after it, *untrimmed*, and it calls
``setenv(name, value, 0)``: a variable that is already set keeps its value, so the first line for
a name wins. There is no quoting, no ``export``, no inline comment and no ``\\r`` handling: those
characters become part of the name or value. The parser here keeps every line's exact text, so
``render_conf(parse_conf(text)) == text`` for any text, and edits touch only the lines they change.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from ddpkit.i18n import _
from ddpkit.ncclconf.known import closest_names, is_known
from ddpkit.ncclconf.problems import NcclConfWarning

ASSIGNMENT = "assignment"
COMMENT = "comment"
BLANK = "blank"
IGNORED = "ignored"  # no '=': NCCL skips it silently

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INLINE_COMMENT = re.compile(r"[ \t]#")


@dataclass(frozen=True)
class ConfLine:
    number: int  # 1-based
    text: str  # the line without its '\n' (a '\r' stays: NCCL keeps it too)
    kind: str
    key: str | None = None  # exactly what NCCL would setenv, untrimmed
    value: str | None = None


@dataclass(frozen=True)
class ConfFile:
    lines: tuple[ConfLine, ...] = ()
    final_newline: bool = True
    path: str | None = None

    def assignments(self) -> tuple[ConfLine, ...]:
        return tuple(line for line in self.lines if line.kind == ASSIGNMENT)

    def effective(self) -> dict[str, ConfLine]:
        """name -> the line NCCL takes it from (the first one; later duplicates never apply)."""
        first: dict[str, ConfLine] = {}
        for line in self.assignments():
            assert line.key is not None
            first.setdefault(line.key, line)
        return first

    def get(self, key: str) -> str | None:
        line = self.effective().get(key)
        return None if line is None else line.value


def classify_line(number: int, text: str) -> ConfLine:
    if text.lstrip(" \t").startswith("#"):
        # Column 0 '#' is skipped by NCCL; an indented one becomes a junk variable named
        # "  # ..." that nothing reads. Either way it is a comment to the person reading it.
        return ConfLine(number, text, COMMENT)
    if "=" not in text:
        return ConfLine(number, text, BLANK if not text.strip() else IGNORED)
    key, _, value = text.partition("=")
    return ConfLine(number, text, ASSIGNMENT, key, value)


def parse_conf(text: str, path: str | None = None) -> ConfFile:
    if text == "":
        return ConfFile((), True, path)
    pieces = text.split("\n")
    final_newline = pieces[-1] == ""
    if final_newline:
        pieces.pop()
    lines = tuple(classify_line(i, piece) for i, piece in enumerate(pieces, start=1))
    return ConfFile(lines, final_newline, path)


def render_conf(conf: ConfFile) -> str:
    if not conf.lines:
        return ""
    body = "\n".join(line.text for line in conf.lines)
    return body + ("\n" if conf.final_newline else "")


def assignment_text(key: str, value: str) -> str:
    return f"{key}={value}"


def _renumbered(lines: Iterable[ConfLine]) -> tuple[ConfLine, ...]:
    return tuple(replace(line, number=i) for i, line in enumerate(lines, start=1))


def with_values(conf: ConfFile, updates: Mapping[str, str]) -> ConfFile:
    """``conf`` with each ``key=value`` of ``updates`` in effect.

    The first line of a key is rewritten in place; later lines of the same key (which NCCL never
    applies) are dropped so the file says one thing; keys the file lacks are appended in the
    order given. Every other line stays exactly as it was.
    """
    done: set[str] = set()
    out: list[ConfLine] = []
    for line in conf.lines:
        key = line.key
        if line.kind == ASSIGNMENT and key is not None and key in updates:
            if key in done:
                continue
            done.add(key)
            out.append(classify_line(0, assignment_text(key, updates[key])))
        else:
            out.append(line)
    appended = [k for k in updates if k not in done]
    for key in appended:
        out.append(classify_line(0, assignment_text(key, updates[key])))
    final_newline = conf.final_newline or bool(appended) or not conf.lines
    return ConfFile(_renumbered(out), final_newline, conf.path)


def without_keys(conf: ConfFile, keys: Iterable[str]) -> ConfFile:
    """``conf`` without any line that sets one of ``keys`` (all of them: a later duplicate
    would otherwise become the one NCCL applies)."""
    drop = set(keys)
    out = [line for line in conf.lines if not (line.kind == ASSIGNMENT and line.key in drop)]
    return ConfFile(_renumbered(out), conf.final_newline, conf.path)


def unified_diff(old_text: str, new_text: str, path: str) -> str:
    """A ``diff -u`` of two versions of ``path`` ("" when they are equal)."""
    diff = difflib.unified_diff(
        old_text.splitlines(keepends=True),
        new_text.splitlines(keepends=True),
        fromfile=f"{path} (current)" if old_text else "/dev/null",
        tofile=f"{path} (new)",
    )
    lines = []
    for piece in diff:
        lines.append(piece if piece.endswith("\n") else piece + "\n\\ No newline at end of file\n")
    return "".join(lines)


def line_problems(conf: ConfFile) -> tuple[NcclConfWarning, ...]:
    """Lines NCCL reads differently from how they look, in file order (ids in docs/nccl-conf.md)."""
    path = conf.path or "<nccl.conf>"
    found: list[NcclConfWarning] = []
    seen: dict[str, int] = {}

    def warn(line: ConfLine, warning_id: str, message: str, hint: str) -> None:
        found.append(
            NcclConfWarning(warning_id, _("{where}: {message}", where=str(path) + ":" + str(line.number),
                                          message=message), hint, path, line.number)
        )

    for line in conf.lines:
        if line.kind == IGNORED:
            warn(line, "conf-line-ignored", _("NCCL ignores {text!r} (no '=')",
                                              text=line.text.strip()),
                 _("write VAR=value, or start the line with # to make it a comment"))
            continue
        if line.kind != ASSIGNMENT:
            continue
        key, value = line.key or "", line.value or ""
        problem = _key_problem(key)
        if problem is not None:
            warn(line, *problem)
            continue
        if key in seen:
            warn(line, "conf-duplicate-key",
                 _("{key} is set again; NCCL keeps the first value (line {line})", key=key,
                   line=seen[key]),
                 _("delete one of the two lines"))
        else:
            seen[key] = line.number
        for warning_id, message, hint in _value_problems(key, value):
            warn(line, warning_id, message, hint)
        if not key.startswith("NCCL_"):
            warn(line, "conf-non-nccl-key",
                 _("{key} is not an NCCL variable; NCCL sets it only when it initialises, after "
                   "Gloo/PyTorch have read their settings", key=key),
                 _("export {name} in the job's environment instead", name=key))
        elif key == "NCCL_CONF_FILE":
            warn(line, "conf-file-in-file",
                 _("NCCL_CONF_FILE inside a config file has no effect on which file NCCL reads"),
                 _("export NCCL_CONF_FILE in the environment instead"))
        elif not is_known(key):
            close = closest_names(key)
            hint = (_("did you mean {name}?", name=close[0]) if close
                    else _("check the name in NCCL's docs"))
            warn(line, "unknown-nccl-variable", _("{key} is not an NCCL variable ddpkit knows",
                                                  key=key), hint)
    return tuple(found)


def _key_problem(key: str) -> tuple[str, str, str] | None:
    if not key:
        return ("conf-line-malformed", _("no variable name before '='"),
                _("write {line}", line="VAR=value"))
    stripped = key.strip()
    if stripped.startswith("export ") or stripped.startswith("export\t"):
        name = stripped[len("export"):].strip()
        return ("conf-line-malformed",
                _("NCCL reads the name as {key!r}: nccl.conf is not a shell script", key=key),
                _("drop 'export': write {line}", line=name + "=..."))
    if stripped != key and _NAME.match(stripped):
        return ("conf-key-whitespace",
                _("NCCL reads the name as {key!r} (spaces kept), so {name} stays unset", key=key,
                  name=stripped),
                _("remove the spaces around the name: {line}", line=stripped + "=..."))
    if not _NAME.match(key):
        return ("conf-line-malformed", _("{key!r} is not a variable name", key=key),
                _("write VAR=value with VAR made of letters, digits and _"))
    return None


def _value_problems(key: str, value: str) -> list[tuple[str, str, str]]:
    problems: list[tuple[str, str, str]] = []
    if value.endswith("\r"):
        problems.append(("conf-crlf",
                         _("{key} ends with a carriage return (Windows line ending) that NCCL "
                           "keeps in the value", key=key),
                         _("convert the file to Unix line endings (dos2unix)")))
        value = value[:-1]
    comment = _INLINE_COMMENT.search(value)
    if comment:
        meant = value[: comment.start()].rstrip()
        problems.append(("conf-inline-comment",
                         _("NCCL takes everything after '=' as the value: {key} is {value!r}, "
                           "not {meant!r}", key=key, value=value, meant=meant),
                         _("move the comment to its own line starting with #")))
    elif value != value.strip():
        problems.append(("conf-value-whitespace",
                         _("{key} is {value!r}: NCCL keeps the spaces in the value", key=key,
                           value=value),
                         _("write {line}", line=key + "=" + value.strip())))
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        problems.append(("conf-value-quoted",
                         _("{key} is {value!r} with the quotes: NCCL does not remove them",
                           key=key, value=value),
                         _("write {line}", line=key + "=" + value[1:-1])))
    return problems
