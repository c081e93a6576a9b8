"""A whole job (ssh fan-out or join token) on a terminal: what its driver reports, rendered.

Implements :class:`~ddpkit.launch.ssh.driver.HostsEvents` and :class:`~ddpkit.launch.join.driver.JoinEvents`:
progress and warnings on stderr, each node's lines prefixed with ``[host:rank]`` (on stderr too
when stdout is kept for one document).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.launch.join.sides import JoinedNode
from ddpkit.launch.join.tokens import JoinToken
from ddpkit.launch.outcomes import OK, JobResult, NodeOutcome
from ddpkit.launch.ssh.fanout import NodeCommand


class JobConsoleEvents:
    """What a job driver reports, on the console (``node_lines_to_stderr``: keep stdout for the
    job's one document or for node 0's report)."""

    def __init__(self, console: Console, *, node_lines_to_stderr: bool = True) -> None:
        self.console = console
        self.node_lines_to_stderr = node_lines_to_stderr

    def waiting(self, message: str) -> None:
        render.status(self.console, message)

    def warning(self, message: str) -> None:
        render.status(self.console, f"warning: {message}")

    def node_line(self, node: NodeCommand, text: str) -> None:
        prefixed = f"[{node.label}] {text}"
        if self.node_lines_to_stderr:  # (a node already left out what -q leaves out)
            render.result(self.console, prefixed)
        else:
            render.line(self.console, prefixed)

    def node_finished(self, outcome: NodeOutcome) -> None:
        how = "finished" if outcome.state == OK else f"{outcome.state}: {outcome.how()}"
        render.status(self.console, f"node {outcome.node_rank} ({outcome.host}) {how}")

    def stopping(self, reason: str) -> None:
        render.status(self.console, f"stopping every node: {reason}")

    def token_ready(self, token: JoinToken, others: int, token_file: Path | None = None) -> None:
        where = "the other machine" if others == 1 else f"each of the other {others} machines"
        if token_file is None:
            render.status(self.console, f"on {where}, run:", keep=True)
            render.result(self.console, f"  ddpkit join {token}")
            return
        # the secret stays in the file (mode 0600): this output may go to logs
        render.status(self.console, f"the join token (job store {token.endpoint}) is in "
                                    f"{token_file}; copy it to {where} (e.g. scp) and run there:",
                      keep=True)
        render.command(self.console, shlex.join(["ddpkit", "join", "--token-file",
                                                 str(token_file)]), to_err=True, keep=True)

    def joined(self, node: JoinedNode, count: int, expected: int) -> None:
        render.status(self.console, f"{node.describe()} [{count}/{expected}]")


def show_job_stacks(console: Console, result: JobResult) -> None:
    """A node dumped its ranks' stacks (a hang): every node's ranks grouped together."""
    if result.stack_lines:
        render.log(console, "ddpkit: every rank of the job, by where it is "
                            f"({len(result.outcomes)} nodes):")
        for text in result.stack_lines:
            render.log(console, f"ddpkit:   {text}")
