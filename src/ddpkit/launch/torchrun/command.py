"""The only module that knows torchrun's flags and the shape of its failure report."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ddpkit.i18n import _
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.torchrun.torch_log import is_harmless
from ddpkit.launch.torchrun.tracebacks import TRACEBACK_HEAD

LOCAL_RANK_MACRO = "${local_rank}"
# ^ torch.distributed.elastic.utils.macros.local_rank: the agent substitutes each worker's local
#   rank for it in the script's arguments (torch.distributed.launch passes --local-rank with it).

# torchrun's flags ddpkit sets itself whose value the user may give instead (the user's wins).
OVERRIDABLE = ("--log-dir", "--redirects", "--tee", "--local-addr")


@dataclass(frozen=True)
class TorchrunFlag:
    """One of torchrun's own flags that ``ddpkit launch`` accepts and passes on verbatim."""

    name: str  # canonical (kebab) spelling; the underscore one is accepted too
    takes_value: bool
    short: str | None = None
    help: str = ""


# Every flag of torch.distributed.run's parser that ddpkit does not handle itself (--nnodes,
# --nproc-per-node, --node-rank, --master-addr, --master-port, --max-restarts, -m, --rdzv-backend,
# --rdzv-endpoint are its own); tests/unit/test_launch_torch_flags.py checks the list against
# torch's parsers.
PASSED_ON: tuple[TorchrunFlag, ...] = (
    TorchrunFlag("--rdzv-id", True, help=_("rendezvous run id (names torchrun's log directory)")),
    TorchrunFlag("--rdzv-conf", True, help=_("K=V,... for the rendezvous (ddpkit adds its timeout "
                 "unless you give one)")),
    TorchrunFlag("--standalone", False, help=_("one node only: a local rendezvous on a free port")),
    TorchrunFlag("--monitor-interval", True),
    TorchrunFlag("--start-method", True),
    TorchrunFlag("--event-log-handler", True),
    TorchrunFlag("--role", True),
    TorchrunFlag("--no-python", False, help=_("run the entry as an executable, not with python")),
    TorchrunFlag("--run-path", False, help=_("run the script with runpy.run_path in the agent's "
                 "interpreter")),
    TorchrunFlag("--log-dir", True, help=_("torchrun's per-rank log directory (default "
                 "<run dir>/torchrun)")),
    TorchrunFlag("--redirects", True, short="-r", help=_("default 3 (both streams to files)")),
    TorchrunFlag("--tee", True, short="-t", help=_("default 3 (both streams to files and console)")),
    TorchrunFlag("--local-ranks-filter", True),
    TorchrunFlag("--duplicate-stdout-filters", True),
    TorchrunFlag("--duplicate-stderr-filters", True),
    TorchrunFlag("--local-addr", True, help=_("this node's address (default: the chosen "
                 "interface's)")),
    TorchrunFlag("--logs-specs", True),
    TorchrunFlag("--numa-binding", True),
    TorchrunFlag("--signals-to-handle", True),
    TorchrunFlag("--shutdown-timeout", True),
    TorchrunFlag("--virtual-local-rank", False),
)


# torch.distributed.run's flags ddpkit handles itself (tests/unit/test_launch_torch_flags.py).
HANDLED = frozenset({"--nnodes", "--nproc-per-node", "--node-rank", "--master-addr",
                     "--master-port", "--max-restarts", "--module", "--rdzv-backend",
                     "--rdzv-endpoint", "--help"})


def installed_flags(wanted: Iterable[str]) -> tuple[TorchrunFlag, ...]:
    """The flags among ``wanted`` (either spelling) that the installed torch's torchrun has and
    ``PASSED_ON`` does not list: read from its own parser (``torch.distributed.run``'s
    ``get_args_parser``), so a new release's flags pass on without a change here. Imports torch:
    call it only for a flag nothing else knows."""
    spellings = {name.split("=", 1)[0] for name in wanted if name.startswith("-")}
    if not spellings:
        return ()
    try:
        from torch.distributed import run as torch_run
        parser = torch_run.get_args_parser()
    except Exception:  # noqa: BLE001 - no torch or another parser: nothing more is known
        return ()
    listed = {f.name for f in PASSED_ON}
    found: dict[str, TorchrunFlag] = {}
    for action in parser._actions:
        options = action.option_strings
        longs = [o for o in options if o.startswith("--")]
        if not longs or not spellings & {*options, *(_other_spelling(o) for o in longs)}:
            continue
        name = next((o for o in longs if "_" not in o), longs[0].replace("_", "-"))
        if name in listed or name in HANDLED:
            continue
        short = next((o for o in options if not o.startswith("--")), None)
        found[name] = TorchrunFlag(name, action.nargs != 0, short=short)
    return tuple(found.values())


def _other_spelling(option: str) -> str:
    body = option[2:]
    return "--" + (body.replace("_", "-") if "_" in body else body.replace("-", "_"))


SHOW_FLAGS = ("--tee", "--redirects", "--local-ranks-filter")  # how torchrun shows rank output


def follows_rank_output(config: LaunchConfig) -> bool:
    """ddpkit shows the ranks' output itself, from the files torchrun writes, unless one of
    torchrun's ``SHOW_FLAGS`` says how torchrun should."""
    return not any(config.has_torchrun_option(flag) for flag in SHOW_FLAGS)


def rank_output_role(config: LaunchConfig) -> str:
    """The role torchrun names the workers with (``[default0]:``), ``--role`` when given."""
    return config.torchrun_option("--role") or "default"


AGENT = "ddpkit.launch.torchrun.agent"  # torchrun as ddpkit runs it (agent.py)
MEMBER_GATE = "ddpkit.workers.member_gate"  # runs the entry once every rank proved membership
JOB_SECRET_ENV = "DDPKIT_JOB_SECRET"  # the secret every node of a job holds (member_gate's)


def gated(config: LaunchConfig, env: Mapping[str, str]) -> bool:
    """Whether the ranks prove membership before the entry runs: a job of several nodes, the node
    holds the job's secret, and the entry is Python (torchrun's --no-python runs a program the
    gate cannot precede)."""
    return (config.multi_node and bool(env.get(JOB_SECRET_ENV))
            and not config.has_torchrun_option("--no-python"))


def torchrun_argv(python: str, config: LaunchConfig, *, local_addr: str | None,
                  log_dir: str, local_rank_arg: str | None = None,
                  gate: bool = False) -> list[str]:
    """torchrun's command line for this node: ``python -m ddpkit.launch.torchrun.agent ...``,
    torchrun's own ``main`` (agent.py), with its static rendezvous on the master.

    ``config.torchrun_options`` (the user's torchrun flags, canonical spelling) follow ddpkit's
    own; one of ``OVERRIDABLE`` replaces ddpkit's value, ``--rdzv-conf`` is merged with ddpkit's
    ``timeout``. ``local_rank_arg`` (``--local_rank=${local_rank}``) goes right after the script,
    before its own arguments, where torch.distributed.launch put it.
    """
    given = dict(config.torchrun_options)
    # the ranks' output goes to files; ddpkit shows it from there (launch/torchrun/rank_output.py) unless
    # the user chose how torchrun shows it, in which case torchrun's own tee does
    tee = "" if follows_rank_output(config) else "3"
    ours = {"--log-dir": log_dir, "--redirects": "3", "--tee": tee, "--local-addr": local_addr}
    rdzv_conf = given.get("--rdzv-conf") or ""
    if not any(item.split("=", 1)[0].strip() == "timeout" for item in rdzv_conf.split(",")):
        rdzv_conf = ",".join(p for p in (f"timeout={config.rdzv_timeout}", rdzv_conf) if p)
    # torchrun's own main, ended without the interpreter's teardown (agent.py); node 0 of several
    # hosts the rendezvous store: on the master address only (torchrun's own would listen on
    # every interface; see bound.py)
    bind = ["--bind", config.master_addr] if config.multi_node and config.node_rank == 0 else []
    launcher = ["-m", AGENT, *bind, "--"]
    argv = [
        python, *launcher,
        f"--nnodes={config.nnodes}",
        f"--nproc-per-node={config.nproc_per_node}",
        f"--node-rank={config.node_rank}",
        f"--master-addr={config.master_addr}",
        f"--master-port={config.master_port}",
        "--rdzv-backend=static",
        f"--rdzv-conf={rdzv_conf}",
        # several nodes: torchrun's restarts count per node and, with the static rendezvous,
        # restart one node's ranks alone; ddpkit restarts every node's torchrun instead
        f"--max-restarts={0 if config.multi_node else config.max_restarts}",
    ]
    for flag in OVERRIDABLE:
        value = given[flag] if flag in given else ours[flag]
        if value:
            argv.append(f"{flag}={value}")
    for flag, option_value in config.torchrun_options:
        if flag in OVERRIDABLE or flag == "--rdzv-conf":
            continue
        argv.append(flag if option_value is None else f"{flag}={option_value}")
    if gate:  # torchrun runs the gate as a module; it runs the entry as torchrun would have
        argv.extend(["-m", MEMBER_GATE, *(["--module"] if config.is_module else [])])
    elif config.is_module:
        argv.append("-m")
    argv.append(config.entry)
    if local_rank_arg:
        argv.append(local_rank_arg)
    argv.extend(config.entry_args)
    return argv


@dataclass(frozen=True)
class RankFailure:
    """One failed worker as torchrun's agent reported it."""

    host: str
    rank: int
    local_rank: int
    exitcode: int
    pid: int | None
    signal: str | None
    message: str


_FIELD = re.compile(r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")


def parse_failures(lines: Iterable[str]) -> tuple[RankFailure | None, tuple[RankFailure, ...]]:
    """The root cause and every failure from torchrun's ``ChildFailedError`` report.

    Returns ``(root_cause, all_failures)``; the root cause is the entry under "Root Cause (first
    observed failure)".
    """
    failures: list[RankFailure] = []
    root: RankFailure | None = None
    in_root = False
    current: dict[str, str] = {}

    def flush() -> None:
        nonlocal root
        if "rank" in current and "exitcode" in current:
            failure = _to_failure(current)
            if failure is not None:
                if in_root and root is None:
                    root = failure
                else:
                    failures.append(failure)
        current.clear()

    for raw in lines:
        text = _strip_prefix(raw.rstrip("\n"))
        if text.startswith("Root Cause"):
            flush()
            in_root = True
            continue
        if re.match(r"^\s*\[\d+\]:\s*$", text):
            flush()
            continue
        match = _FIELD.match(text)
        if match:
            current[match.group(1)] = match.group(2).strip()
        elif text.startswith("=====") or text.startswith("-----"):
            flush()
    flush()
    everything = tuple(sorted(([root] if root else []) + failures, key=lambda f: f.rank))
    return root, everything


def _strip_prefix(text: str) -> str:
    # torchrun's own lines come unprefixed, but a launcher may prefix "[host:rank] ".
    return re.sub(r"^\[[^\]]*\]\s?", "", text) if text.startswith("[") and "]:" not in text[:6] \
        else text


def _to_failure(fields: dict[str, str]) -> RankFailure | None:
    rank_match = re.match(r"(\d+)\s*\(local_rank:\s*(\d+)\)", fields["rank"])
    code_match = re.match(r"(-?\d+)\s*\(pid:\s*(\d+)\)\s*(\S+)?", fields["exitcode"])
    if not rank_match or not code_match:
        return None
    signal = (code_match.group(3) or "").strip("()") or None
    return RankFailure(
        host=fields.get("host", "?"),
        rank=int(rank_match.group(1)),
        local_rank=int(rank_match.group(2)),
        exitcode=int(code_match.group(1)),
        pid=int(code_match.group(2)),
        signal=signal if signal and signal != "<N/A>" else None,
        message=fields.get("traceback", ""),
    )


def quote_command(argv: Sequence[str]) -> str:
    import shlex

    return " ".join(shlex.quote(a) for a in argv)


# What CPython's logging prints when a handler fails to emit a record (Handler.handleError): this
# header, the tracebacks, "Call stack:", the caller's frames, "Message: ..." and "Arguments: ...".
LOGGING_ERROR = "--- Logging error ---"
_LOGGING_MESSAGE = "Message: "
_LOGGING_ARGUMENTS = "Arguments: "


class AgentTracebackFilter:
    """Holds back torchrun's own traceback (its agent's, never a worker's: those come prefixed
    ``[defaultN]:``) and drops it when it is only the ``ChildFailedError`` report, which ddpkit's
    one-paragraph summary replaces, or, when ddpkit stopped torchrun itself (``stopped``), the
    ``SignalException`` its SIGTERM raised. A failed log record of torch's agent (Python's
    ``--- Logging error ---`` block, e.g. a SIGTERM that lands while the agent logs its exit
    barrier's end) is held the same way and dropped when its message is one that ddpkit folds as
    harmless. Anything else is released unchanged at :meth:`finish`."""

    def __init__(self) -> None:
        self._held: list[str] | None = None

    def feed(self, line: str) -> list[str]:
        if self._held is not None:
            self._held.append(line)
            return []
        if line.startswith((TRACEBACK_HEAD, LOGGING_ERROR)):
            self._held = [line]
            return []
        return [line]

    def finish(self, *, stopped: bool = False) -> list[str]:
        held, self._held = self._held or [], None
        if any("ChildFailedError" in line for line in held):
            return []
        if stopped and any("SignalException" in line for line in held):
            return []
        return _without_harmless_logging_errors(held)


def _without_harmless_logging_errors(lines: list[str]) -> list[str]:
    """``lines`` less every complete logging-error block whose message torch_log folds."""
    kept: list[str] = []
    block: list[str] | None = None
    for line in lines:
        if line.startswith(LOGGING_ERROR):
            kept += block or []
            block = [line]
        elif block is not None:
            block.append(line)
            if line.startswith(_LOGGING_ARGUMENTS):
                message = next((x[len(_LOGGING_MESSAGE):] for x in block
                                if x.startswith(_LOGGING_MESSAGE)), "")
                if not is_harmless(message):
                    kept += block
                block = None
        else:
            kept.append(line)
    return kept + (block or [])
