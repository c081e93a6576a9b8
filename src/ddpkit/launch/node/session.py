"""One node's whole launch: facts -> plan -> preflight -> torchrun -> result. Used by `launch` and
`test` alike, so the test program takes exactly the path a user's script takes."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from ddpkit.doctor.log.run_dir import LAUNCHER_LOG
from ddpkit.error_ids import RENDEZVOUS_TIMEOUT
from ddpkit.errors import (
    DeadlineExceeded,
    Interrupted,
    JobFailed,
    NetworkProblem,
)
from ddpkit.i18n import _, _n
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.events import Progress
from ddpkit.launch.hang.model import HangPolicy
from ddpkit.launch.hang.progress_exchange import Connector
from ddpkit.launch.hang.watcher import HANG_STOPPED, HangWatcher
from ddpkit.launch.node import facts as node_facts
from ddpkit.launch.node.entry_check import entry_error
from ddpkit.launch.node.plan import NodePlan, plan_node
from ddpkit.launch.node.preflight import MasterProbe, check_port_free, wait_for_master
from ddpkit.launch.node.result import NodeResult
from ddpkit.launch.node.run_dir import LauncherLog, claim
from ddpkit.launch.node.run_dir import default_run_dir as default_run_dir  # bench, test
from ddpkit.launch.node.waits import WaitAnnouncer, describe_wait
from ddpkit.launch.torchrun.command import (
    AgentTracebackFilter,
    follows_rank_output,
    parse_failures,
    rank_output_role,
)
from ddpkit.launch.torchrun.processes import ProcessState, StartDeadline, run_process
from ddpkit.launch.torchrun.rank_output import RankOutputTail
from ddpkit.launch.torchrun.torch_log import TorchLog, barrier_gave_up_warning
from ddpkit.wording import clauses


class LaunchEvents(Progress, Protocol):
    """One node's launch (``session.execute``)."""

    def planned(self, plan: NodePlan) -> None: ...

    def output(self, line: str) -> None:
        """One line torchrun or a rank printed."""

    def torch_internal(self, line: str, condensed: str | None) -> None:
        """One line of torch's C++ log (``torch_log``) as torch printed it, and what ddpkit
        condensed it to (None: folded, or part of a wait's status line): shown raw only when
        asked."""

    def warned(self, message: str) -> None:
        """Something the user should know that does not change the job's result (a log file
        that could not be written)."""


RESTART_COUNT_ENV = "DDPKIT_RESTART_COUNT"  # which restart of the whole job a start is (0 first)
RENDEZVOUS_STOPPED = _("the rendezvous did not complete")
RENDEZVOUS_GRACE_S = 2.0  # torchrun's own start-up before its rendezvous clock starts


def _rendezvous_deadline(plan: NodePlan, probe: MasterProbe | None) -> StartDeadline | None:
    """torchrun starts no worker until every node has met; past --rdzv-timeout it never will.

    torchrun's own timeout does not cover a master port that accepts and never answers (torch's
    store client waits on its handshake for good), so ddpkit bounds it from outside.
    """
    if not plan.config.multi_node:
        return None
    return StartDeadline(plan.config.rdzv_timeout + RENDEZVOUS_GRACE_S, RENDEZVOUS_STOPPED,
                         None if probe is None else probe.answered_at)


def _rendezvous_message(plan: NodePlan) -> str:
    config = plan.config
    if config.is_master:
        return _("node {rank} ({host}): not every node joined the job within --rdzv-timeout "
                 "{seconds} s, so no rank was started", rank=config.node_rank, host=plan.hostname,
                 seconds=config.rdzv_timeout)
    return _("node {rank} ({host}): the master {master}:{port} accepted the connection but the "
             "rendezvous did not complete within --rdzv-timeout {seconds} s",
             rank=config.node_rank, host=plan.hostname, master=config.master_addr,
             port=config.master_port, seconds=config.rdzv_timeout)


def _rendezvous_hint(plan: NodePlan) -> str:
    config = plan.config
    if config.is_master:
        return _("start the same job on every other node (node ranks 1..{last}), or raise "
                 "--rdzv-timeout; `ddpkit doctor --nnodes N ...` checks that the nodes can reach "
                 "each other", last=config.nnodes - 1)
    return _("check that {master}:{port} is this job's master (another program may hold that "
             "port, or the master runs a different --nnodes), and that the master was started; "
             "then rerun", master=config.master_addr, port=config.master_port)


def prepare(config: LaunchConfig, env: Mapping[str, str], *, home: Path, cwd: Path,
            python: str, peer_command: tuple[str, ...] | None = None) -> NodePlan:
    """Facts and plan for this node; nothing is started and nothing is written."""
    facts = node_facts.gather(config, env, home, cwd=cwd)
    run_dir = Path(config.run_dir) if config.run_dir else default_run_dir(config, cwd)
    return plan_node(config, facts, env, python=python, run_dir=str(run_dir),
                     peer_command=peer_command)


def check_startable(plan: NodePlan) -> None:
    """``script-not-found`` when the entry cannot run on this node: raised before any wait (no
    rank could start anyway, and the other nodes would wait for this one until they time out)."""
    if plan.entry_problem is not None:
        raise entry_error(plan.entry_problem, entry=plan.config.entry,
                          is_module=plan.config.is_module, node_rank=plan.config.node_rank)


def preflight(plan: NodePlan, events: LaunchEvents) -> MasterProbe | None:
    """The master checks its port is free; a worker probes the master.

    The probe runs while torchrun starts (returned) when torchrun's own wait for the master's
    store, --rdzv-timeout, is at least the probe's --connect-timeout; with a shorter rendezvous
    timeout torchrun would give up first, so the worker waits for the master before starting it.
    """
    config = plan.config
    if config.is_master and not config.has_torchrun_option("--standalone"):
        check_port_free(config.master_port)
    elif config.multi_node:
        events.waiting(_("waiting for the master {master}:{port} (via {ifname}, up to "
                         "{seconds:g} s)", master=config.master_addr, port=config.master_port,
                         ifname=plan.interface.ifname, seconds=config.connect_timeout))
        if config.rdzv_timeout >= config.connect_timeout:
            return MasterProbe(plan).start()
        wait_for_master(config.master_addr, config.master_port, source=plan.interface.address,
                        ifname=plan.interface.ifname, timeout=config.connect_timeout)
    return None


PEER_HOLD_TIMEOUTS = 4  # unsealed peer progress delays a hang report by at most 4 timeouts


def watcher(plan: NodePlan, events: LaunchEvents,
            stack_request: threading.Event | None = None,
            store_connector: Connector | None = None) -> HangWatcher:
    """This node's hang watcher (``--hang-timeout``, ``--hang-action``; py-spy found on the
    workers' PATH or next to their python). ``store_connector``: how the progress counter
    reaches the job's store (the CLI's imports torch with its C++ log quiet first)."""
    from ddpkit.launch.hang.progress_exchange import ProgressExchange, bystander
    from ddpkit.launch.hang.pyspy import find_py_spy

    config = plan.config
    def exchange() -> ProgressExchange:
        return ProgressExchange(config.master_addr, config.master_port, node_rank=config.node_rank,
                                nnodes=config.nnodes, key=config.progress_key,
                                connector=store_connector or bystander)

    hold = None if config.progress_key else PEER_HOLD_TIMEOUTS * config.hang_timeout
    return HangWatcher(run_dir=Path(plan.run_dir), log_dir=plan.log_dir, node_rank=config.node_rank,
                       host=plan.hostname, policy=HangPolicy(config.hang_timeout, peer_hold_s=hold),
                       action=config.hang_action, py_spy=find_py_spy(plan.env, plan.argv[0]),
                       say=events.waiting, request=stack_request,
                       exchange_factory=exchange if config.multi_node and config.hang_timeout > 0
                       else None)


def execute(plan: NodePlan, events: LaunchEvents, *,
            should_stop: Callable[[], str | None] | None = None,
            stack_request: threading.Event | None = None,
            store_connector: Connector | None = None,
            running: Callable[[float], str | None] | None = None) -> NodeResult:
    """Preflight, then run torchrun for this node; raise on failure with a one-paragraph summary.

    ``should_stop`` lets a job-level supervisor (ssh fan-out, join) stop this node early: it is
    polled while torchrun runs and its answer becomes the reason in the ``job-stopped`` error.
    ``stack_request`` (set by the CLI on SIGUSR1) asks for every rank's stack now. A hang (no rank
    made progress for ``--hang-timeout``) dumps the stacks; with ``--hang-action stop`` the job is
    then stopped with ``job-hung``. ``running(seconds)`` words what the ranks are doing while they
    run (``ddpkit test`` reads their stages), said like the waits, every ~10 s.
    """
    check_startable(plan)
    probe = preflight(plan, events)
    try:
        return _run_node(plan, events, probe, should_stop, stack_request, store_connector,
                         running)
    finally:
        if probe is not None:
            probe.finish()


def _run_node(plan: NodePlan, events: LaunchEvents, probe: MasterProbe | None,
              should_stop: Callable[[], str | None] | None,
              stack_request: threading.Event | None,
              store_connector: Connector | None = None,
              running: Callable[[float], str | None] | None = None) -> NodeResult:
    claim(Path(plan.run_dir), flight_recorder=any(
        k in plan.env_set for k in ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")))
    attempts = 1 + (plan.config.max_restarts if plan.config.multi_node else 0)
    started = time.monotonic()
    for attempt in range(attempts):
        timeout = plan.config.job_timeout
        if timeout is not None:
            timeout = max(0.0, timeout - (time.monotonic() - started))
        result, watch = _attempt(plan, events, probe, should_stop, stack_request, attempt, timeout,
                                 store_connector, running)
        if result.ok or attempt + 1 == attempts or not _restartable(result, probe):
            break
        events.waiting(_("node {rank} ({host}): this attempt failed: {summary}",
                         rank=plan.config.node_rank, host=plan.hostname,
                         summary=result.summary()))
        events.waiting(_("restarting torchrun on this node: restart {number} of {most} "
                         "(--max-restarts counts the whole job: every node restarts once per "
                         "failure of the job)", number=attempt + 1,
                         most=plan.config.max_restarts))
    return _verdict(plan, probe, result, watch)


def _restartable(result: NodeResult, probe: MasterProbe | None) -> bool:
    """A failure of the job itself, not a stop, a timeout, Ctrl-C or a missing master."""
    outcome = result.outcome
    return not (outcome.interrupted or outcome.timed_out or outcome.stopped
                or (probe is not None and probe.failure is not None))


def _attempt(plan: NodePlan, events: LaunchEvents, probe: MasterProbe | None,
             should_stop: Callable[[], str | None] | None,
             stack_request: threading.Event | None, attempt: int,
             timeout: float | None,
             store_connector: Connector | None = None,
             running: Callable[[float], str | None] | None = None
             ) -> tuple[NodeResult, HangWatcher]:
    shown = AgentTracebackFilter()
    torch_log = TorchLog()
    watch = watcher(plan, events, stack_request, store_connector)
    stop_checks = [check for check in (should_stop, probe and probe.stop_reason, watch.poll)
                   if check]

    def stop() -> str | None:
        return next((reason for check in stop_checks if (reason := check())), None)

    waits = WaitAnnouncer(describe_wait(plan.config, master_answered=None if probe is None else
                                        lambda: probe.answered is not None,
                                        torch_saw=lambda: torch_log.connect_problem),
                          running=running)

    ranks: RankOutputTail | None = None

    def on_state(state: ProcessState) -> None:
        if ranks is not None and ranks.found_any and not state.started_children:
            state = dataclasses.replace(state, started_children=True)  # ranks came and went
        if (line := waits.observe(state, time.monotonic())) is not None:
            events.waiting(line)

    log = LauncherLog(Path(plan.run_dir) / LAUNCHER_LOG, append=bool(attempt))

    def on_line(line: str) -> None:
        log.write(line)
        seen = torch_log.feed(line)
        if seen.internal:
            events.torch_internal(line, seen.text)
        elif seen.text is not None:
            for text in shown.feed(seen.text):
                events.output(text)

    try:
        ranks = (RankOutputTail(plan.log_dir, rank_output_role(plan.config))
                 if follows_rank_output(plan.config) else None)
        outcome = run_process(plan.argv, attempt_env(plan.env, attempt), on_line=on_line,
                              timeout=timeout, rank_output=ranks, should_stop=stop,
                              start_deadline=_rendezvous_deadline(plan, probe),
                              started=watch.started, on_state=on_state)
    finally:
        watch.close()
        log.close()
    if (unwritten := log.warning(kept=plan.log_dir)) is not None:
        events.warned(unwritten)
    for text in shown.finish(stopped=bool(outcome.stopped or outcome.interrupted or
                                          outcome.timed_out)):
        events.output(text)
    if (folded := torch_log.folded_summary()) is not None:
        events.waiting(folded)
    if torch_log.barrier_gave_up is not None:
        events.warned(barrier_gave_up_warning(torch_log.barrier_gave_up))
    root, failures = parse_failures(outcome.tail)
    return NodeResult(plan=plan, outcome=outcome, root_cause=root, failures=failures,
                      stack_reports=tuple(watch.reports), restarts=attempt), watch


def attempt_env(env: Mapping[str, str], attempt: int) -> dict[str, str]:
    """The environment of one start of torchrun: the plan's, plus which restart of the job this
    is. With several nodes torchrun runs with --max-restarts=0, so the TORCHELASTIC_RESTART_COUNT
    it gives the workers is 0 on every start; a script that resumes from a checkpoint on a restart
    reads DDPKIT_RESTART_COUNT instead (the same as torchrun's count on one node)."""
    return {**env, RESTART_COUNT_ENV: str(attempt)}


def _doctor_hint(plan: NodePlan) -> str:
    """How to read this run with ``doctor --log``: its run directory, which it reads as this
    summary does (the ranks' own ends), unless torchrun's logs were sent elsewhere."""
    if plan.log_dir == f"{plan.run_dir}/torchrun":
        return _("`ddpkit doctor --log {path}` (with the other nodes' run directories: the whole "
                 "job) explains common causes", path=plan.run_dir)
    command = f"ddpkit doctor --log {plan.run_dir}/{LAUNCHER_LOG} {plan.log_dir}/*/attempt_*/*/*.log"
    return _("`{command}` explains common causes", command=command)


def _own_rendezvous_timeout(plan: NodePlan, result: NodeResult) -> bool:
    """torchrun gave up on the rendezvous itself before ddpkit's bound stopped it (its
    --rdzv-conf timeout is the same --rdzv-timeout; ddpkit's bound adds a grace, and on a busy
    machine either can come first): no rank started, and its lines read as a rendezvous
    timeout."""
    if not plan.config.multi_node or result.ok or result.outcome.stopped or result.rank_logs():
        return False
    top = result.verdict().top
    return top is not None and top.id == RENDEZVOUS_TIMEOUT


def _verdict(plan: NodePlan, probe: MasterProbe | None, result: NodeResult,
             watch: HangWatcher) -> NodeResult:
    """``result`` when the node succeeded; otherwise the error that says why it did not."""
    outcome = result.outcome
    if probe is not None and probe.failure is not None and not outcome.interrupted:
        raise probe.failure  # torchrun was stopped for it (or failed while the master was away)
    if outcome.interrupted:
        ranks = outcome.descendants_stopped  # alive when the stop began, not every one seen
        raise Interrupted(
            _n("stopped torchrun and {count} rank process on node {rank} ({host})",
               "stopped torchrun and {count} rank processes on node {rank} ({host})", ranks,
               rank=plan.config.node_rank, host=plan.hostname) if ranks else
            _("stopped torchrun (no rank process was running) on node {rank} ({host})",
              rank=plan.config.node_rank, host=plan.hostname))
    if outcome.timed_out:
        raise DeadlineExceeded("job-timeout", result.summary(),
                               _("per-rank logs are in {path}; raise the timeout or run "
                                 "`ddpkit doctor --log` on them", path=plan.run_dir),
                               details=result.to_dict())
    if outcome.stopped == RENDEZVOUS_STOPPED or _own_rendezvous_timeout(plan, result):
        raise NetworkProblem("rendezvous-timeout", _rendezvous_message(plan),
                             _rendezvous_hint(plan), details=result.to_dict())
    if outcome.stopped == HANG_STOPPED or (not result.ok and watch.hung and not outcome.stopped
                                           and plan.config.hang_action == "stop"):
        # (a hung job that another node stopped first ends here too: its ranks lost their peers)
        hung = [r for r in watch.reports if r.reason == "hang"][-1]
        raise DeadlineExceeded("job-hung", clauses([hung.headline, *hung.lines()]),
                               _("every rank's stack is in {path}/stacks/; fix the rank named as "
                                 "the likely cause, or raise --hang-timeout (0 turns it off) if "
                                 "it only computes without output or CPU use (e.g. waits on a "
                                 "GPU)", path=plan.run_dir),
                               details=result.to_dict())
    own = result.root_end()
    if outcome.stopped and (own is None or not own.is_cause or own.raised is None):
        # (a rank that raised an exception of its own before the stop came is this node's
        # failure: the job was stopped because of it, whichever node's end the master saw first)
        raise JobFailed("job-stopped", _("node {rank} ({host}) was stopped: {reason}",
                                         rank=plan.config.node_rank, host=plan.hostname,
                                         reason=outcome.stopped),
                        _("per-rank logs are in {path}", path=plan.run_dir),
                        details=result.to_dict())
    if not result.ok:
        fix = result.known_fix()
        summary = result.summary()
        if result.restarts:
            summary = _n("{summary} (after {count} restart of the job, --max-restarts {most})",
                         "{summary} (after {count} restarts of the job, --max-restarts {most})",
                         result.restarts, summary=summary, most=plan.config.max_restarts)
        where = _("all output is in {path}; {hint}", path=plan.run_dir, hint=_doctor_hint(plan))
        raise JobFailed("job-failed", summary, clauses([fix, where]) if fix else where,
                        details=result.to_dict())
    return result
