"""The whole job from one place over ssh: one ``python -m ddpkit launch --node-rank I`` per host.

Each host runs the per-node launcher (so each picks its own interface by route to the master) in
the same working directory, with ``--supervised`` (stop when stdin reaches end of file, i.e. when
the ssh session dies or the supervisor lets go) and ``--json`` (its verdict on stdout, its log on
stderr). The supervisor streams every node's stderr live with a ``[host:rank]`` prefix, and the
moment one node fails it stops all the others: it closes their stdin, waits ``grace`` seconds, then
terminates their ssh clients (a remote node whose session ends stops by itself).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import psutil

from ddpkit.errors import Interrupted
from ddpkit.i18n import _
from ddpkit.launch.envpass import PassedEnv, to_wire
from ddpkit.launch.job import TORCHRUN_COMMANDS, JobSpec
from ddpkit.launch.job import node_argv as job_node_argv
from ddpkit.launch.outcomes import (
    FAILED,
    INTERRUPTED,
    INTERRUPTED_EXIT,
    LOST,
    OK,
    STOPPED,
    NodeOutcome,
    outcome_from_error,
    state_word,
)
from ddpkit.launch.ssh.hostfile import Host
from ddpkit.launch.ssh.remote import SSH_FAILED, SshSettings, describe_ssh_failure, remote_command, ssh_argv
from ddpkit.launch.torchrun.command import quote_command
from ddpkit.launch.torchrun.processes import DescendantTracker


class NodeEvents(Protocol):
    """The nodes a job supervisor runs (``fanout.supervise``)."""

    def node_line(self, node: NodeCommand, text: str) -> None:
        """One line a node printed on its stderr (its log)."""

    def node_finished(self, outcome: NodeOutcome) -> None: ...

    def stopping(self, reason: str) -> None:
        """Every node still running is being stopped, for ``reason``."""


STOP_GRACE_S = 12.0  # a stopped node's own cleanup takes up to 10 s (TERMINATE_GRACE_S)
KILL_GRACE_S = 3.0
TAIL_LINES = 200


@dataclass(frozen=True)
class NodeCommand:
    """What the supervisor runs for one node, and the ddpkit command that runs there."""

    node_rank: int
    host: Host
    local: bool
    argv: tuple[str, ...]  # run here: ssh ... or, for this machine, python -m ddpkit ...
    node_argv: tuple[str, ...]  # the ddpkit command on the node itself
    env: Mapping[str, str] | None  # the child's env here (None: inherit, for ssh)
    cwd: str
    stdin_data: bytes = b""  # written to the node's stdin first: the env it gets (envpass.to_wire)

    @property
    def label(self) -> str:
        return f"{self.host.label}:{self.node_rank}"

    def display(self) -> str:
        return quote_command(self.argv)

    def to_dict(self) -> dict[str, Any]:
        return {"node_rank": self.node_rank, "host": self.host.to_dict(), "local": self.local,
                "argv": list(self.argv), "node_argv": list(self.node_argv), "cwd": self.cwd}


def plan_nodes(hosts: Sequence[Host], local: Sequence[bool], *, job: JobSpec, master_addr: str,
               python: str, cwd: str, passed: PassedEnv, base_env: Mapping[str, str],
               settings: SshSettings, run_dir_base: str | None) -> tuple[NodeCommand, ...]:
    """Pure: one NodeCommand per host, each running ``job``'s share for its rank (a host's slots
    give its process count). The passed environment and the job's ``--env`` overrides never enter
    an argv: they travel on the node's stdin (``--env-stdin``)."""
    commands = []
    for rank, host in enumerate(hosts):
        own = ["--supervised", "--env-stdin", "--json"]
        if run_dir_base and job.command in TORCHRUN_COMMANDS:
            own = ["--run-dir", f"{run_dir_base.rstrip('/')}/node{rank}", *own]
        node_argv = [python, "-m", "ddpkit", *job_node_argv(
            job, rank, master_addr, nproc_per_node=str(host.slots) if host.slots else None,
            env_in_argv=False, node_flags=own)]
        if local[rank]:
            argv, env = list(node_argv), dict(base_env)
        else:
            argv = ssh_argv(host, remote_command(node_argv, cwd=cwd), settings)
            env = None
        commands.append(NodeCommand(rank, host, local[rank], tuple(argv), tuple(node_argv), env, cwd,
                                    to_wire(passed)))
    return tuple(commands)


def parse_document(stdout: str) -> dict[str, Any] | None:
    """The last JSON document a node printed (a login shell may have printed other things)."""
    decoder = json.JSONDecoder()
    found: dict[str, Any] | None = None
    position = stdout.find("{")
    while position >= 0:
        try:
            doc, end = decoder.raw_decode(stdout, position)
        except ValueError:
            position = stdout.find("{", position + 1)
            continue
        if isinstance(doc, dict) and "schema" in doc:
            found = doc
        position = stdout.find("{", end)
    return found


def outcome_of(node: NodeCommand, *, returncode: int, stdout: str, tail: Sequence[str],
               stopped: bool, observed_at: float) -> NodeOutcome:
    """Pure: how a node ended, from its exit status and what it printed."""
    base: dict[str, Any] = {"node_rank": node.node_rank, "host": node.host.label,
                            "returncode": returncode}
    doc = parse_document(stdout)
    error = None
    if doc is not None:
        schema = str(doc.get("schema", ""))
        if schema.startswith("ddpkit.error/"):
            error = doc.get("error")
        elif isinstance(doc.get("launch_error"), dict):
            error = doc["launch_error"]
        elif doc.get("ok") is False:
            return _attach(NodeOutcome.from_dict(
                {**base, "state": FAILED, "error_id": "checks-failed",
                 "message": str(doc.get("summary") or "") or _("checks failed")},
                observed_at=observed_at), doc)
    if isinstance(error, dict):
        return _attach(outcome_from_error(error, node_rank=node.node_rank, host=node.host.label,
                                          observed_at=observed_at, returncode=returncode,
                                          stopped=stopped), doc)
    if returncode == 0:
        return _attach(NodeOutcome.from_dict({**base, "state": OK}, observed_at=observed_at), doc)
    if returncode == INTERRUPTED_EXIT or (stopped and returncode in (-15, -9, 143)):
        state = STOPPED if stopped else INTERRUPTED
        return NodeOutcome.from_dict({**base, "state": state, "message": "interrupted"},
                                     observed_at=observed_at)
    last = [line for line in tail if line.strip()][-3:]
    if not node.local and returncode == SSH_FAILED:
        if stopped:
            return NodeOutcome.from_dict({**base, "state": STOPPED}, observed_at=observed_at)
        message = _("the ssh session to {host} ended: {why}", host=node.host.ssh_target,
                    why=describe_ssh_failure(tail))
        return NodeOutcome.from_dict({**base, "state": LOST, "error_id": "ssh-lost",
                                      "message": message}, observed_at=observed_at)
    message = _("ddpkit on {host} exited with code {code}", host=node.host.label, code=returncode)
    return NodeOutcome.from_dict({**base, "state": STOPPED if stopped else FAILED,
                                  "error_id": "node-exited", "message": message,
                                  "last_lines": last}, observed_at=observed_at)


def _attach(outcome: NodeOutcome, doc: Mapping[str, Any] | None) -> NodeOutcome:
    return dataclasses.replace(outcome, document=doc)


class _Running:
    def __init__(self, node: NodeCommand, events: NodeEvents, log: IO[str] | None) -> None:
        self.node = node
        self.proc = subprocess.Popen(
            list(node.argv), env=dict(node.env) if node.env is not None else None, cwd=node.cwd,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, text=True, encoding="utf-8", errors="replace", bufsize=1,
        )
        if node.stdin_data and self.proc.stdin is not None:
            with contextlib.suppress(OSError, ValueError):  # a node that died at once says why
                self.proc.stdin.write(node.stdin_data.decode("utf-8"))
                self.proc.stdin.flush()
        self.tracker = DescendantTracker(self.proc.pid) if node.local else None
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.stdout: list[str] = []
        self.log = log
        self.readers = [threading.Thread(target=self._pump_err, args=(events,), daemon=True),
                        threading.Thread(target=self._pump_out, daemon=True)]
        for reader in self.readers:
            reader.start()

    def _pump_err(self, events: NodeEvents) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            text = raw.rstrip("\n")
            self.tail.append(text)
            if self.log is not None:
                self.log.write(raw if raw.endswith("\n") else raw + "\n")
                self.log.flush()
            events.node_line(self.node, text)

    def _pump_out(self) -> None:
        assert self.proc.stdout is not None
        self.stdout.append(self.proc.stdout.read())

    def let_go(self) -> None:
        """Close the node's stdin: its ddpkit (or the remote one, via ssh) stops by itself."""
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()

    def signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)
        if sig == signal.SIGKILL and self.tracker is not None:
            for child in self.tracker.alive():
                with contextlib.suppress(psutil.Error):
                    child.kill()

    def finish(self) -> tuple[int, str]:
        self.proc.wait()
        if self.tracker is not None:  # a local node must not leave its torchrun behind
            leftovers = self.tracker.alive()
            for child in leftovers:
                with contextlib.suppress(psutil.Error):
                    child.kill()
            psutil.wait_procs(leftovers, timeout=5)
        for reader in self.readers:  # (a leftover holding the pipes would have kept them open)
            reader.join(timeout=5)
        return self.proc.returncode, "".join(self.stdout)


def supervise(nodes: Sequence[NodeCommand], events: NodeEvents, *, output_dir: Path | None = None,
              grace: float = STOP_GRACE_S, clock: Callable[[], float] = time.monotonic
              ) -> tuple[NodeOutcome, ...]:
    """Run every node to its end; stop them all when one fails or on Ctrl-C (re-raised after the
    cleanup). Returns one outcome per node, in node order."""
    logs: dict[int, IO[str]] = {}
    if output_dir is not None:
        output_dir.mkdir(parents=True, exist_ok=True)
        for node in nodes:
            name = f"node{node.node_rank}-{node.host.label.replace(':', '_')}.log"
            logs[node.node_rank] = open(output_dir / name, "w", encoding="utf-8")  # noqa: SIM115
    running: dict[int, _Running] = {}
    outcomes: dict[int, NodeOutcome] = {}
    stop_at: float | None = None
    escalation = 0
    interrupted = False

    def stop_all(reason: str) -> None:
        nonlocal stop_at
        if stop_at is not None:
            return
        stop_at = clock()
        events.stopping(reason)
        for run in running.values():
            run.let_go()

    try:
        for node in nodes:
            running[node.node_rank] = _Running(node, events, logs.get(node.node_rank))
        while running:
            try:
                for rank, run in sorted(running.items()):
                    if run.tracker is not None:
                        run.tracker.scan()
                    if run.proc.poll() is None:
                        continue
                    returncode, stdout = run.finish()
                    outcome = outcome_of(run.node, returncode=returncode, stdout=stdout,
                                         tail=list(run.tail), stopped=stop_at is not None,
                                         observed_at=clock())
                    if output_dir is not None and stdout.strip():
                        (output_dir / f"node{rank}-result.json").write_text(stdout)
                    outcomes[rank] = outcome
                    del running[rank]
                    events.node_finished(outcome)
                    if outcome.state != OK:
                        stop_all(_("node {node} ({host}) {state}", node=rank,
                                   host=run.node.host.label, state=state_word(outcome.state)))
                if stop_at is not None and running:
                    waited = clock() - stop_at
                    if escalation == 0 and waited > grace:
                        escalation = 1
                        for run in running.values():
                            run.signal(signal.SIGTERM)
                    elif escalation == 1 and waited > grace + KILL_GRACE_S:
                        escalation = 2
                        for run in running.values():
                            run.signal(signal.SIGKILL)
                time.sleep(0.1)
            except KeyboardInterrupt:
                if not interrupted:
                    interrupted = True
                    stop_all(_("interrupted on the controller"))
                else:  # a second Ctrl-C: do not wait for a graceful stop
                    escalation = max(escalation, 1)
                    for run in running.values():
                        run.signal(signal.SIGTERM)
    finally:
        for run in running.values():  # only on an unexpected error: leave nothing behind
            run.let_go()
            run.signal(signal.SIGKILL)
            run.finish()
        for handle in logs.values():
            handle.close()
    if interrupted:
        raise Interrupted(_("stopped the job on all {count} nodes", count=len(nodes)))
    return tuple(outcomes[node.node_rank] for node in nodes)


def was_stopped(outcome: NodeOutcome) -> bool:
    return outcome.state in (STOPPED, INTERRUPTED)
