"""The thin I/O around :mod:`ddpkit.launch.hang.model`: sample this node's ranks, dump their stacks.

Polled by :func:`ddpkit.launch.torchrun.processes.run_process`'s loop (through ``should_stop``), so a dump
always happens before anything is stopped: on a hang it dumps first and only then, with
``--hang-action stop``, answers the stop reason that makes run_process stop the tree.
It also keeps ``<run dir>/ranks.json`` (every rank's pid and start time) current, which is how
``ddpkit stacks <run dir>`` finds the ranks from another terminal.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psutil

from ddpkit.atomic_file import replace_file
from ddpkit.errors import ConfigError
from ddpkit.file_safety import read_regular
from ddpkit.i18n import _
from ddpkit.launch.config import STOP
from ddpkit.launch.hang import model as hang
from ddpkit.launch.hang.progress_exchange import ProgressExchange
from ddpkit.launch.hang.pyspy import DUMP_TIMEOUT_S, Target, dump_all
from ddpkit.launch.hang.stacks import RankStack, render_stack, summary_lines
from ddpkit.launch.hang.suspects import cause_lines
from ddpkit.launch.hang.trust import registry_owner, vet
from ddpkit.plain_text import shown
from ddpkit.report import document

StackReason = Literal["hang", "asked"]  # a hang was detected, or SIGUSR1 asked for the stacks

RANKS_FILE = "ranks.json"
MAX_REGISTRY_BYTES = 4 * 1024 * 1024
STACKS_DIR = "stacks"
STACKS_JSON = "stacks.json"  # the report as JSON: what `ddpkit doctor --log <stacks dir>` reads
SAMPLE_INTERVAL_S = 1.0
EXCHANGE_AFTER_S = 10.0  # of running ranks before the job-wide counter is joined (see below)
STOP_GRACE_S = 5.0  # after a hang's dump, before stopping: the other nodes dump theirs meanwhile
HANG_STOPPED = "the job was hung"


@dataclass(frozen=True)
class StackReport:
    """One dump of every local rank: why, the stacks, the grouped summary."""

    reason: StackReason
    node_rank: int | None
    host: str
    stacks: tuple[RankStack, ...]
    verdict: hang.HangVerdict | None = None
    dump_s: float = 0.0  # how long the dump took
    directory: str | None = None  # where stacks/rank<N>.txt went
    headline: str = ""
    causes: tuple[str, ...] = ()  # what the ranks' process states tell (.suspects)

    def lines(self) -> list[str]:
        return [*self.causes, *summary_lines(self.stacks)]

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "node_rank": self.node_rank, "host": self.host,
                "headline": self.headline, "summary": self.lines(),
                "verdict": self.verdict.to_dict() if self.verdict else None,
                "dump_s": round(self.dump_s, 3), "directory": self.directory,
                "stacks": [s.to_dict() for s in self.stacks]}


def write_stacks(directory: Path, report: StackReport) -> None:
    """Every file whole or not at all, through the atomic writer (no other user's symbolic link
    followed): a reader (``doctor --log``) never sees half a stacks.json."""
    directory.mkdir(parents=True, exist_ok=True)
    for stack in report.stacks:
        name = f"rank{stack.rank}" if stack.rank is not None else f"local-rank{stack.local_rank}"
        replace_file(directory / f"{name}.txt", render_stack(stack))
    replace_file(directory / "summary.txt", "\n".join([report.headline, *report.lines()]) + "\n")
    replace_file(directory / STACKS_JSON,
                 json.dumps(document("stacks", 1, report.to_dict()), indent=1) + "\n")


@dataclass
class HangWatcher:
    """Samples every ``interval`` s; dumps on a hang or when ``request`` is set (SIGUSR1)."""

    run_dir: Path
    log_dir: str
    node_rank: int
    host: str
    policy: hang.HangPolicy
    action: str
    py_spy: str | None
    say: Callable[[str], None]  # one line for the user (the CLI logs it to stderr)
    request: threading.Event | None = None
    interval: float = SAMPLE_INTERVAL_S
    dump_timeout: float = DUMP_TIMEOUT_S
    clock: Callable[[], float] = time.monotonic
    exchange_factory: Callable[[], ProgressExchange] | None = None
    # ^ the job-wide progress counter (several nodes), made once this node's ranks run, so that
    #   ddpkit's store client never takes part in torchrun's rendezvous (a run where it connected
    #   earlier once saw a node's agent never start its ranks; the cause was not pinned down)
    # Joined only once the ranks have run for ``exchange_after()`` s: the store client imports
    #   torch (about 2 s of CPU), which a short job would pay for nothing, on every node, while
    #   its ranks compete for the same cores. A node idle from the start still sees a peer's
    #   progress long before its own timeout passes: the delay is at most a quarter of it.
    exchange: ProgressExchange | None = None
    reports: list[StackReport] = field(default_factory=list)
    stop_reason: str | None = None
    stop_grace: float = STOP_GRACE_S
    _stop_at: float | None = None
    _root: int | None = None
    _state: hang.HangState = field(default_factory=hang.HangState)
    _targets: dict[int, Target] = field(default_factory=dict)  # pid -> target
    _next: float = 0.0
    _ranks_since: float | None = None  # when this node's ranks were first seen

    def started(self, pid: int) -> None:
        self._root = pid

    def exchange_after(self) -> float:
        """Seconds of running ranks before this node joins the job-wide progress counter."""
        return min(EXCHANGE_AFTER_S, self.policy.timeout_s / 4)

    def close(self) -> None:
        if self.exchange is not None:
            self.exchange.close()

    @property
    def hung(self) -> bool:
        """A hang was reported and no rank has made progress since."""
        return self._state.reported

    def poll(self) -> str | None:
        if self.stop_reason is not None:
            return self.stop_reason
        now = self.clock()
        if self._stop_at is not None:
            if now >= self._stop_at:
                self.stop_reason = HANG_STOPPED
            return self.stop_reason
        asked = self.request is not None and self.request.is_set()
        if self._root is None or (now < self._next and not asked):
            return None
        self._next = now + self.interval
        sample = self._sample(now)
        self._state = hang.observe(self._state, sample, self.policy)
        if self.exchange is not None and self._state.local_progress:
            self.exchange.progressed()
        if asked:
            assert self.request is not None
            self.request.clear()
            self.dump("asked", _("node {node} ({host}): stacks as asked (SIGUSR1)",
                                 node=self.node_rank, host=self.host))
        found = hang.verdict(self._state, now, self.policy)
        if found is None:
            return None
        self._state = hang.reported(self._state)
        headline = _("node {node} ({host}): the job looks hung: {verdict}", node=self.node_rank,
                     host=self.host, verdict=found.describe(self.policy.timeout_s))
        self.dump("hang", headline, found)
        if self.action == STOP:
            # Every node's ranks went idle together; stopping this node's ranks at once would make
            # the others fail ("connection closed") before they dump their own stacks.
            self._stop_at = self.clock() + self.stop_grace
        return None

    def dump(self, reason: StackReason, headline: str, found: hang.HangVerdict | None = None) -> StackReport:
        start = self.clock()
        targets = sorted(self._targets.values(), key=lambda t: t.local_rank)
        states = _states(targets)  # before py-spy touches them
        stacks = dump_all(targets, self.py_spy, timeout=self.dump_timeout)
        directory = self.run_dir / STACKS_DIR
        report = StackReport(reason, self.node_rank, self.host, tuple(stacks), found,
                             self.clock() - start, str(directory), headline,
                             tuple(cause_lines(stacks, states)))
        with contextlib.suppress(OSError):
            write_stacks(directory, report)
        self.reports.append(report)
        self.say(headline)
        for line in report.lines():
            self.say(_("  {line}", line=line))
        self.say(_("  full stacks: {path}/", path=str(directory)))
        return report

    def _sample(self, now: float) -> hang.Sample:
        ranks = self._discover()
        if ranks and self._ranks_since is None:
            self._ranks_since = now
        if not ranks and self._ranks_since is not None:
            # this node's ranks have ended: the job's store may close at any moment (once every
            # node's agent passed its exit barrier), so no store call from here on
            self.exchange_factory = None
            if self.exchange is not None:
                self.exchange.stop()
        if self.exchange is None and self.exchange_factory is not None \
                and self._ranks_since is not None and now - self._ranks_since >= self.exchange_after():
            self.exchange, self.exchange_factory = self.exchange_factory(), None
        sizes = _log_sizes(self.log_dir)
        samples = []
        for target in ranks:
            cpu = _cpu_seconds(target.pid)
            if cpu is None:
                continue
            samples.append(hang.RankSample(target.local_rank, target.pid, cpu,
                                           sizes.get(target.local_rank, 0)))
        counter = self.exchange.value() if self.exchange is not None else None
        return hang.Sample(now, tuple(samples), counter)

    def _discover(self) -> list[Target]:
        assert self._root is not None
        try:
            children = psutil.Process(self._root).children()
        except psutil.Error:
            children = []
        live: dict[int, Target] = {}
        for child in children:
            with contextlib.suppress(psutil.Error):
                if child.status() == psutil.STATUS_ZOMBIE:  # ended, not yet reaped by torchrun
                    continue
            target = self._targets.get(child.pid) or _target(child, self.node_rank, self.host)
            if target is not None:
                live[child.pid] = target
        if set(live) != set(self._targets):
            self._targets = live
            self._write_registry()
        return list(live.values())

    def _write_registry(self) -> None:
        doc = document("ranks", 1, {
            "node_rank": self.node_rank, "host": self.host, "launcher_pid": os.getpid(),
            "torchrun_pid": self._root,
            "ranks": [{"local_rank": t.local_rank, "rank": t.rank, "pid": t.pid,
                       "create_time": t.create_time}
                      for t in sorted(self._targets.values(), key=lambda t: t.local_rank)]})
        path = self.run_dir / RANKS_FILE
        with contextlib.suppress(OSError):
            replace_file(path, json.dumps(doc, indent=1) + "\n")


def _target(proc: psutil.Process, node_rank: int, host: str) -> Target | None:
    try:
        env = proc.environ()
        created = proc.create_time()
    except psutil.Error:
        return None
    local = env.get("LOCAL_RANK", "")
    if not local.isdigit():
        return None  # not a rank (torchrun's own helpers)
    rank = env.get("RANK", "")
    return Target(int(local), proc.pid, created, int(rank) if rank.isdigit() else None,
                  node_rank, host)


def _states(targets: Sequence[Target]) -> dict[int, str]:
    """pid -> psutil status (``stopped`` is state T) of every rank that is still there."""
    states = {}
    for target in targets:
        with contextlib.suppress(psutil.Error):
            states[target.pid] = str(psutil.Process(target.pid).status())
    return states


def _cpu_seconds(pid: int) -> float | None:
    try:
        proc = psutil.Process(pid)
        total = sum(proc.cpu_times()[:2])
        for child in proc.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += sum(child.cpu_times()[:2])
        return float(total)
    except psutil.Error:
        return None


def _log_sizes(log_dir: str) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for path in glob.glob(os.path.join(glob.escape(log_dir), "*", "attempt_*", "*", "*.log")):
        local = Path(path).parent.name
        if local.isdigit():
            with contextlib.suppress(OSError):
                sizes[int(local)] = sizes.get(int(local), 0) + os.stat(path).st_size
    return sizes


def read_registry(run_dir: Path) -> tuple[list[Target], dict[str, Any]]:
    """The ranks a running ``ddpkit launch`` recorded in ``run_dir``; ConfigError when none.
    The document gets ``owner``: the uid that owns the file (who wrote it)."""
    path = run_dir / RANKS_FILE
    try:
        owner = registry_owner(path)
        doc = json.loads(read_regular(path, MAX_REGISTRY_BYTES).decode("utf-8"))
        doc["owner"] = owner
        ranks = doc["ranks"]
        targets = [Target(int(r["local_rank"]), int(r["pid"]), float(r["create_time"]),
                          int(r["rank"]) if r.get("rank") is not None else None,
                          doc.get("node_rank"), str(doc.get("host", ""))) for r in ranks]
    except FileNotFoundError:
        raise ConfigError("no-rank-list", _("{path} does not exist: no job has started ranks "
                                            "there", path=str(path)),
                          _("give the run directory of a running `ddpkit launch` (it prints it; "
                            "by default ./ddpkit-runs/<time>-node<R>-<pid>)")) from None
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise ConfigError("bad-rank-list", _("{path} cannot be read: {error}", path=str(path),
                                             error=shown(getattr(exc, "strerror", None)
                                                         or str(exc), 200)),
                          _("give the run directory of a running `ddpkit launch`")) from None
    return targets, doc


def dump_run_dirs(run_dirs: Sequence[Path], py_spy: str | None,
                  timeout: float = DUMP_TIMEOUT_S) -> list[RankStack]:
    """``ddpkit stacks``: every rank recorded in these run directories, read where it runs; a
    pid that is not the run's (:func:`ddpkit.launch.hang.trust.vet`) is refused, not dumped."""
    targets: list[Target] = []
    refused: list[RankStack] = []
    for run_dir in run_dirs:
        found, doc = read_registry(run_dir)
        root = doc.get("torchrun_pid")
        allowed, foreign = vet(found, doc["owner"], root if isinstance(root, int) else None)
        targets += allowed
        refused += foreign
    return [*dump_all(targets, py_spy, timeout=timeout), *refused]
