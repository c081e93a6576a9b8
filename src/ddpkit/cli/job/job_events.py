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
from ddpkit.cli.output.width import display_width, wrap
from ddpkit.i18n import _, _n
from ddpkit.launch.job import lang_flags
from ddpkit.launch.join.sides import JoinedNode
from ddpkit.launch.join.tokens import JoinToken
from ddpkit.launch.outcomes import OK, JobResult, NodeOutcome
from ddpkit.launch.ssh.fanout import NodeCommand

_STACK_PREFIX = "ddpkit:   "


class JobConsoleEvents:
    """What a job driver reports, on the console (``node_lines_to_stderr``: keep stdout for the
    job's one document or for node 0's report)."""

    def __init__(self, console: Console, *, node_lines_to_stderr: bool = True) -> None:
        self.console = console
        self.node_lines_to_stderr = node_lines_to_stderr

    def waiting(self, message: str) -> None:
        render.status(self.console, message)

    def warning(self, message: str) -> None:
        render.status(self.console, _("warning: {message}", message=message))

    def node_line(self, node: NodeCommand, text: str) -> None:
        """A node's line after ``[host:rank]``; one the prefix pushes past the console's width
        goes on over further lines with the same prefix (a node lays its lines out for the full
        width, and at 32 nodes the widest prefix takes 15 columns of it)."""
        prefix = f"[{node.label}] "
        parts = [prefix + text]
        if display_width(parts[0]) > self.console.width:
            parts = wrap(text, self.console.width, initial_indent=prefix,
                         subsequent_indent=prefix + "  ", break_long_words=True) or parts
        for part in parts:
            if self.node_lines_to_stderr:  # (a node already left out what -q leaves out)
                render.result(self.console, part)
            else:
                render.line(self.console, part)

    def node_finished(self, outcome: NodeOutcome) -> None:
        if outcome.state == OK:
            text = _("node {rank} ({host}) finished", rank=outcome.node_rank, host=outcome.host)
        else:
            text = _("node {rank} ({host}) {state}: {how}", rank=outcome.node_rank,
                     host=outcome.host, state=outcome.state, how=outcome.how())
        render.status(self.console, text)

    def stopping(self, reason: str) -> None:
        render.status(self.console, _("stopping every node: {reason}", reason=reason))

    def token_ready(self, token: JoinToken, others: int, token_file: Path | None = None) -> None:
        if token_file is None:
            render.status(self.console, _n("on the other machine, run:",
                                           "on each of the other {count} machines, run:", others),
                          keep=True)
            render.result(self.console, "  " + shlex.join(["ddpkit", "join", *lang_flags(),
                                                           str(token)]))
            return
        # the secret stays in the file (mode 0600): this output may go to logs
        render.status(self.console, _n("the join token (job store {endpoint}) is in {path}; copy "
                                       "it to the other machine (e.g. scp) and run there:",
                                       "the join token (job store {endpoint}) is in {path}; copy "
                                       "it to each of the other {count} machines (e.g. scp) and "
                                       "run there:", others, endpoint=token.endpoint,
                                       path=str(token_file)),
                      keep=True)
        render.command(self.console, shlex.join(["ddpkit", "join", *lang_flags(), "--token-file",
                                                 str(token_file)]), to_err=True, keep=True)

    def joined(self, node: JoinedNode, count: int, expected: int) -> None:
        render.status(self.console, _("{node} [{count}/{expected}]", node=node.describe(),
                                      count=count, expected=expected))


def show_job_stacks(console: Console, result: JobResult) -> None:
    """A node dumped its ranks' stacks (a hang): every node's ranks grouped together."""
    if result.stack_lines:
        render.log(console, _n("ddpkit: every rank of the job, by where it is ({count} node):",
                               "ddpkit: every rank of the job, by where it is ({count} nodes):",
                               len(result.outcomes)))
        for text in result.stack_lines:
            render.log(console, _STACK_PREFIX + text)  # a rank's stack: quoted, not ddpkit's prose
