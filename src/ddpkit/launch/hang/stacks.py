"""Ranks' Python stacks (from ``py-spy dump --json``): parsed, located, grouped (pure).

Each rank is placed by its main thread: the innermost frame of the user's own code (not torch,
site-packages or the standard library) and, inside it, the torch.distributed call it waits in.
Ranks at the same place form a group; the group that differs from the rest is named as the likely
cause: one not inside a collective while others are, else the smallest group.

Every name, file name and source line comes from another process (py-spy reads it from the
rank's memory) or from a file anyone with access to the run directory could rewrite: each is
bounded and stripped of control characters (:func:`ddpkit.plain_text.shown`) when it is parsed,
so no escape sequence reaches the terminal or the written reports.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ddpkit.i18n import _, _n
from ddpkit.plain_text import shown
from ddpkit.wording import clauses, commas

C10D_FILES = ("torch/distributed/distributed_c10d.py",)
C10D_WRAPPERS = ("torch/distributed/c10d_logger.py",)
NAME_CHARS, PATH_CHARS, CODE_CHARS = 200, 1000, 300
_LIBRARY = re.compile(r"/(?:site|dist)-packages/|/lib/python\d\.\d+/|^<frozen |^<string>")


@dataclass(frozen=True)
class Frame:
    name: str
    filename: str  # full path
    short: str  # py-spy's short form: the package-relative path
    line: int

    def at(self) -> str:
        return f"{self.short}:{self.line}"


@dataclass(frozen=True)
class ThreadStack:
    thread_id: int
    name: str
    os_thread_id: int | None
    active: bool
    frames: tuple[Frame, ...]  # innermost first, as py-spy prints them


@dataclass(frozen=True)
class RankStack:
    """One rank's dump, or why there is none (``error_id``, ``error``, ``fix``)."""

    local_rank: int
    pid: int
    rank: int | None = None
    node_rank: int | None = None
    host: str = ""
    threads: tuple[ThreadStack, ...] = ()
    error_id: str | None = None
    error: str = ""
    fix: str = ""
    code: Mapping[str, str] = field(default_factory=dict)  # "file:line" -> source line

    @property
    def ok(self) -> bool:
        return self.error_id is None

    def who(self) -> str:
        return (_("rank {rank}", rank=self.rank) if self.rank is not None else
                _("local rank {local}", local=self.local_rank))

    def main_thread(self) -> ThreadStack | None:
        for thread in self.threads:
            if thread.os_thread_id == self.pid or thread.name == "MainThread":
                return thread
        return self.threads[0] if self.threads else None

    def to_dict(self) -> dict[str, Any]:
        place = locate(self)
        return {
            "rank": self.rank, "local_rank": self.local_rank, "node_rank": self.node_rank,
            "host": self.host, "pid": self.pid, "ok": self.ok, "error_id": self.error_id,
            "error": self.error or None, "fix": self.fix or None,
            "where": place.to_dict() if place is not None else None,
            "threads": [{"thread_id": t.thread_id, "name": t.name, "os_thread_id": t.os_thread_id,
                         "active": t.active,
                         "frames": [{"name": f.name, "filename": f.filename, "short": f.short,
                                     "line": f.line} for f in t.frames]} for t in self.threads],
            "code": dict(self.code),
            "text": render_stack(self),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RankStack:
        """The inverse of :meth:`to_dict` (a node's JSON, read by its job supervisor)."""
        def opt(key: str) -> int | None:
            return _int(data.get(key))

        threads = tuple(
            ThreadStack(_int(t.get("thread_id")) or 0, _text(t.get("name") or "", NAME_CHARS),
                        _int(t.get("os_thread_id")), bool(t.get("active")),
                        tuple(Frame(_text(f.get("name", "?"), NAME_CHARS),
                                    _text(f.get("filename", "?"), PATH_CHARS),
                                    _text(f.get("short", "?"), PATH_CHARS), _int(f.get("line")) or 0)
                              for f in _items(t.get("frames")) if isinstance(f, Mapping)))
            for t in _items(data.get("threads")) if isinstance(t, Mapping))
        code = data.get("code")
        return cls(local_rank=opt("local_rank") or 0, pid=opt("pid") or 0, rank=opt("rank"),
                   node_rank=opt("node_rank"), host=_text(data.get("host") or "", NAME_CHARS),
                   threads=threads,
                   error_id=_text(data["error_id"], NAME_CHARS) if data.get("error_id") else None,
                   error=_text(data.get("error") or "", CODE_CHARS),
                   fix=_text(data.get("fix") or "", CODE_CHARS),
                   code={_text(k, PATH_CHARS): _text(v, CODE_CHARS) for k, v in code.items()}
                   if isinstance(code, Mapping) else {})


def _text(value: object, limit: int) -> str:
    """A string field as it may be shown: bounded, no control characters (a non-string field of
    a crafted file is shown as its type, never expanded)."""
    if isinstance(value, str):
        return shown(value, limit)
    number = _int(value)
    return str(number) if number is not None else f"<{type(value).__name__}>"


def _int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() <= 64:
        return value
    return None


def _items(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def parse_pyspy_json(text: str) -> tuple[ThreadStack, ...]:
    """``py-spy dump --json`` output -> threads; ValueError when it is not that."""
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("py-spy's JSON is not a list of threads")
    threads = []
    for item in data:
        if not isinstance(item, dict):
            raise ValueError("py-spy's JSON thread is not an object")
        frames = tuple(
            Frame(_text(f.get("name", "?"), NAME_CHARS), _text(f.get("filename", "?"), PATH_CHARS),
                  _text(f.get("short_filename") or f.get("filename", "?"), PATH_CHARS),
                  _int(f.get("line")) or 0)
            for f in _items(item.get("frames")) if isinstance(f, dict))
        threads.append(ThreadStack(_int(item.get("thread_id")) or 0,
                                   _text(item.get("thread_name") or "", NAME_CHARS),
                                   _int(item.get("os_thread_id")), bool(item.get("active")), frames))
    return tuple(threads)


def is_library(frame: Frame) -> bool:
    return bool(_LIBRARY.search(frame.filename)) or frame.short.startswith("torch/")


@dataclass(frozen=True)
class Place:
    """Where a rank is: ``call`` (a torch.distributed function, or the library function its own
    code called) at ``user`` (its innermost frame of user code)."""

    call: str | None
    collective: bool  # ``call`` is a torch.distributed function
    user: Frame | None
    inner: Frame | None  # the innermost frame

    @property
    def key(self) -> tuple[str | None, str | None]:
        return (self.call, self.user.at() if self.user else self.inner.at() if self.inner else None)

    def describe(self, code: Mapping[str, str] | None = None, *, plural: bool = False) -> str:
        at = self.key[1] or _("an unknown place")
        source = (code or {}).get(at)
        shown = f"{at} `{source}`" if source else at
        if self.collective:
            return (_("wait in {call} at {at}", call=self.call, at=shown) if plural else
                    _("waits in {call} at {at}", call=self.call, at=shown))
        if self.call:
            return (_("are in {call} at {at}", call=self.call, at=shown) if plural else
                    _("is in {call} at {at}", call=self.call, at=shown))
        return _("are at {at}", at=shown) if plural else _("is at {at}", at=shown)

    def to_dict(self) -> dict[str, Any]:
        return {"call": self.call, "collective": self.collective,
                "at": self.key[1], "inner": self.inner.at() if self.inner else None}


def locate(stack: RankStack) -> Place | None:
    thread = stack.main_thread()
    if thread is None or not thread.frames:
        return None
    frames = thread.frames
    user_index = next((i for i, f in enumerate(frames) if not is_library(f)), None)
    inner = frames[:user_index] if user_index is not None else frames
    c10d = [f for f in inner if f.short.endswith(C10D_FILES)]
    if c10d:
        call: str | None = c10d[-1].name  # the public function the user called
        collective = True
    else:
        named = [f for f in inner if not f.short.endswith(C10D_WRAPPERS)]
        call = named[-1].name if named and user_index is not None else None
        collective = False
    user = frames[user_index] if user_index is not None else None
    return Place(call, collective, user, frames[0])


@dataclass(frozen=True)
class Group:
    place: Place | None
    members: tuple[RankStack, ...]

    def names(self) -> str:
        ranks = [m.rank for m in self.members]
        if all(r is not None for r in ranks):
            shown = ", ".join(str(r) for r in sorted(r for r in ranks if r is not None))
            return _n("rank {ranks}", "ranks {ranks}", len(ranks), ranks=shown)
        return commas([m.who() for m in self.members])

    def detail(self) -> str:
        parts = []
        for m in self.members:
            node = m.host or (_("node {node}", node=m.node_rank) if m.node_rank is not None else "")
            pid = _("pid {pid}", pid=m.pid)
            parts.append(commas([node, pid]) if node else pid)
        return clauses(parts)


def group(stacks: Iterable[RankStack]) -> tuple[list[Group], list[RankStack]]:
    """Ranks with a stack grouped by place (largest group first), and the ranks without one."""
    buckets: dict[Any, list[RankStack]] = {}
    places: dict[Any, Place | None] = {}
    failed = []
    for stack in sorted(stacks, key=_order):
        if not stack.ok:
            failed.append(stack)
            continue
        place = locate(stack)
        key = place.key if place is not None else None
        buckets.setdefault(key, []).append(stack)
        places.setdefault(key, place)
    groups = [Group(places[k], tuple(v)) for k, v in buckets.items()]
    groups.sort(key=lambda g: (-len(g.members), _order(g.members[0])))
    return groups, failed


def odd_one_out(groups: Sequence[Group]) -> tuple[Group, str] | None:
    """The group that differs, and why; None when all ranks are at one place."""
    if len(groups) < 2:
        return None
    waiting = [g for g in groups if g.place is not None and g.place.collective]
    outside = [g for g in groups if g not in waiting]
    if waiting and outside:
        suspect = min(outside, key=lambda g: (len(g.members), _order(g.members[0])))
        calls = sorted({g.place.call or "?" for g in waiting if g.place is not None})
        count = sum(len(g.members) for g in waiting)
        return suspect, _n("it is not inside a collective while {count} other rank waits in "
                           "{calls}", "it is not inside a collective while {count} other ranks "
                           "wait in {calls}", count, calls=", ".join(calls))

    suspect = min(groups[1:], key=lambda g: (len(g.members), _order(g.members[0])))
    most = groups[0]
    there = (most.place.describe(_code(most), plural=True) if most.place else
             _("show no Python frame"))
    return suspect, _("it is at a different place from the {count} rank(s) that {there}",
                      count=len(most.members), there=there)



def _code(g: Group) -> Mapping[str, str]:
    return g.members[0].code


def _order(stack: RankStack) -> tuple[int, int, int]:
    return (stack.rank if stack.rank is not None else 1 << 30, stack.node_rank or 0, stack.local_rank)


def summary_lines(stacks: Sequence[RankStack]) -> list[str]:
    """One line per group, then the likely cause, then ranks without a stack."""
    groups, failed = group(stacks)
    lines: list[str] = []
    for g in groups:
        what = (g.place.describe(_code(g), plural=len(g.members) > 1)
                if g.place is not None else _("showed no Python frame"))
        if len(g.members) <= 2 or len(groups) > 1 and g is not groups[0]:
            lines.append(_("{names} {what} ({detail})", names=g.names(), what=what,
                           detail=g.detail()))
        else:
            lines.append(_("{names} {what}", names=g.names(), what=what))
    odd = odd_one_out(groups)
    if odd is not None:
        suspect, why = odd
        lines.append(_("likely cause: {names} ({detail}): {why}", names=suspect.names(),
                       detail=suspect.detail(), why=why))
    elif len(groups) == 1 and groups[0].place is not None and groups[0].place.collective:
        lines.append(_("every rank here waits in the same collective: the rank holding it up is "
                       "elsewhere (another node's report names it), or a peer is gone"))
    for stack in failed:
        lines.append(_("{who} (pid {pid}): no stack [{id}]: {error}; fix: {fix}", who=stack.who(),
                       pid=stack.pid, id=stack.error_id, error=stack.error, fix=stack.fix)
                     if stack.fix else
                     _("{who} (pid {pid}): no stack [{id}]: {error}", who=stack.who(),
                       pid=stack.pid, id=stack.error_id, error=stack.error))
    return lines


def render_stack(stack: RankStack) -> str:
    """py-spy's own text layout, for ``stacks/rank<N>.txt`` and the terminal."""
    head = f"{stack.who()} (local rank {stack.local_rank}, pid {stack.pid}" + \
        (f", {stack.host}" if stack.host else "") + ")"
    if not stack.ok:
        return f"{head}: no stack [{stack.error_id}]: {stack.error}\n" + \
            (f"fix: {stack.fix}\n" if stack.fix else "")
    out = [head]
    for thread in stack.threads:
        state = "active" if thread.active else "idle"
        out.append(f"Thread {thread.os_thread_id or thread.thread_id} ({state}): \"{thread.name}\"")
        for frame in thread.frames:
            out.append(f"    {frame.name} ({frame.at()})")
            source = stack.code.get(frame.at())
            if source:
                out.append(f"        {source}")
    return "\n".join(out) + "\n"
