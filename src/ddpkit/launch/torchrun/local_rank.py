"""The legacy local-rank argument: which spelling a script expects, decided from its source.

Scripts written for ``python -m torch.distributed.launch`` read their local rank from an argv
option (``parser.add_argument("--local_rank", ...)``) instead of ``LOCAL_RANK``. torchrun passes
none; torch 2.x's own ``torch.distributed.launch`` passes ``--local-rank=N``, which a script that
declares only ``--local_rank`` rejects. ddpkit reads the script with :mod:`ast` (never importing
or running it) and passes the spelling it declares, per rank, through torchrun's own
``${local_rank}`` macro. Everything here is pure: the source bytes come from
:mod:`ddpkit.launch.torchrun.entry_file`.
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from ddpkit.errors import UsageError
from ddpkit.i18n import _
from ddpkit.launch.config import LocalRankMode

LocalRankFlag = Literal["--local-rank", "--local_rank"]
AUTO: LocalRankMode = "auto"
DASH: LocalRankMode = "dash"
UNDERSCORE: LocalRankMode = "underscore"
NONE: LocalRankMode = "none"
OWN_WORKER: LocalRankMode = ""  # not a user's script: ddpkit's own worker, which reads LOCAL_RANK
MODES: tuple[LocalRankMode, ...] = (AUTO, DASH, UNDERSCORE, NONE)
SPELLINGS: dict[LocalRankMode, LocalRankFlag] = {DASH: "--local-rank", UNDERSCORE: "--local_rank"}
_BY_SPELLING = {flag: mode for mode, flag in SPELLINGS.items()}
_BY_SPELLING_FLAG: dict[str, LocalRankFlag] = {flag: flag for flag in SPELLINGS.values()}
# Calls that declare options: argparse's add_argument (on a parser, group or subparser) and
# click's option decorator.
_DECLARING_CALLS = frozenset({"add_argument", "option"})
MAX_SOURCE_BYTES = 8 << 20  # a bigger "script" is not read: pass --local-rank-arg instead


@dataclass(frozen=True)
class EntrySource:
    """What could be read of the entry point (gathered by :mod:`ddpkit.launch.torchrun.entry_file`)."""

    path: str | None  # the file that runs (None when it could not be found)
    data: bytes | None  # its bytes (None when not read)
    problem: str | None = None  # why it was not read, in words


@dataclass(frozen=True)
class Declaration:
    flag: LocalRankFlag
    line: int


@dataclass(frozen=True)
class LocalRankChoice:
    """What ddpkit passes each rank, and why (shown by --dry-run, the summary and --json)."""

    mode: LocalRankMode  # what was asked
    flag: LocalRankFlag | None  # the option passed, None for nothing
    reason: str
    file: str | None = None
    line: int | None = None
    warning: str | None = None  # auto could not decide for a reason the user should see

    def argument(self, macro: str) -> str | None:
        """``--local_rank=${local_rank}``: torchrun substitutes each worker's local rank."""
        return f"{self.flag}={macro}" if self.flag else None

    def describe(self) -> str:
        if self.flag:
            return _("{flag}=<local rank> ({reason})", flag=self.flag, reason=self.reason)
        return _("none ({reason})", reason=self.reason)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def check_use_env(mode: LocalRankMode, use_env: bool) -> None:
    """UsageError ``local-rank-arg-conflict`` for --use-env with an explicit spelling."""
    if use_env and mode in SPELLINGS:
        raise UsageError("local-rank-arg-conflict",
                         _("--use-env says the script reads LOCAL_RANK, --local-rank-arg {mode} "
                           "says it wants an argument", mode=mode), _("drop one of them"))


def declarations(source: bytes | str) -> tuple[Declaration, ...]:
    """Every ``--local_rank``/``--local-rank`` option string an ``add_argument`` call declares.

    Raises SyntaxError/ValueError/RecursionError when the source does not parse.
    """
    tree = ast.parse(source)
    found: list[Declaration] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _call_name(node.func) not in _DECLARING_CALLS:
            continue
        for arg in node.args:
            if isinstance(arg, ast.Constant) and arg.value in _BY_SPELLING:
                found.append(Declaration(_BY_SPELLING_FLAG[arg.value], arg.lineno))
    return tuple(sorted(found, key=lambda d: (d.line, d.flag)))


def _call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def passes_its_own(entry_args: tuple[str, ...]) -> str | None:
    """The local-rank option the user already passes the script, if any."""
    for arg in entry_args:
        flag = arg.split("=", 1)[0]
        if flag in _BY_SPELLING:
            return flag
    return None


def decide(mode: LocalRankMode, source: EntrySource | None, entry_args: tuple[str, ...] = (), *,
           use_env: bool = False) -> LocalRankChoice:
    """What to pass: the explicit mode, or (auto) the spelling the script's source declares."""
    check_use_env(mode, use_env)
    if use_env:
        return LocalRankChoice(mode, None, _("--use-env: the script reads LOCAL_RANK, which "
                                             "torchrun always sets (--use-env is always on); no "
                                             "argument passed"))
    if mode == OWN_WORKER:
        return LocalRankChoice(mode, None, _("ddpkit's own worker reads LOCAL_RANK"))
    if mode in SPELLINGS:
        return LocalRankChoice(mode, SPELLINGS[mode], f"--local-rank-arg {mode}")
    if mode == NONE:
        return LocalRankChoice(mode, None, _("--local-rank-arg none: the script reads LOCAL_RANK"))
    own = passes_its_own(entry_args)
    if own:
        return LocalRankChoice(mode, None, _("the script's arguments already contain {flag}; "
                                             "nothing added (every rank gets the same value: "
                                             "drop it to let ddpkit pass each rank its own)",
                                             flag=own))
    if source is None or source.data is None:
        problem = (source.problem if source else None) or _("the entry point was not read")
        path = source.path if source else None
        return LocalRankChoice(mode, None, _("{problem}; no argument passed", problem=problem),
                               path,
                               warning=_("could not check whether the script expects "
                                         "--local_rank ({problem}); if it does, pass "
                                         "--local-rank-arg underscore (or dash)",
                                         problem=problem))
    name = source.path or _("the script")
    try:
        found = declarations(source.data)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        line = getattr(exc, "lineno", None)
        what = f"{type(exc).__name__}: {getattr(exc, 'msg', None) or exc}"
        return LocalRankChoice(mode, None, _("{name} does not parse ({what}); no argument "
                                             "passed", name=name, what=what),
                               source.path, line,
                               warning=_("{name} does not parse as Python ({what}), so ddpkit "
                                         "could not check whether it expects --local_rank",
                                         name=name, what=what))
    flags = {d.flag for d in found}
    if not flags:
        return LocalRankChoice(mode, None, _("{name} declares neither --local_rank nor "
                                             "--local-rank; no argument passed (it reads "
                                             "LOCAL_RANK, as torchrun expects; if its parser is "
                                             "in another file, pass --local-rank-arg)", name=name),
                               source.path)
    chosen = SPELLINGS[DASH] if SPELLINGS[DASH] in flags else SPELLINGS[UNDERSCORE]
    first = next(d for d in found if d.flag == chosen)
    reason = (_("{name}:{line} declares add_argument('{flag}') (it declares both: the dashed one "
                "is passed)", name=name, line=first.line, flag=chosen) if len(flags) == 2 else
              _("{name}:{line} declares add_argument('{flag}')", name=name, line=first.line,
                flag=chosen))
    return LocalRankChoice(mode, chosen, reason, source.path, first.line)
