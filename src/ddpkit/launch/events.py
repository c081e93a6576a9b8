"""What a front end is told while ddpkit runs one node or a whole job: the events protocols.

Nothing under ``launch/`` prints. The code that runs a node (``session.execute``), supervises the
nodes of a job (``fanout.supervise``) or drives a whole job (``hosts_driver``, ``join_driver``)
reports through one of these protocols instead; the CLI implements them with its renderer, tests
with recorders. They form one family:

=====================  =================================================================
:class:`Progress`      ``waiting(message)``: a progress line, what ddpkit does or waits for
:class:`LaunchEvents`  one node's launch: its plan, then every line torchrun and its ranks print
:class:`NodeEvents`    the nodes a job supervisor runs: their lines, their ends, the stop order
:class:`HostsEvents`   the ssh fan-out: its preflight progress and its nodes
:class:`JoinEvents`    token mode on the master: the token, each node that joins, warnings
=====================  =================================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from ddpkit.launch.join.sides import JoinedNode
    from ddpkit.launch.join.tokens import JoinToken
    from ddpkit.launch.node.plan import NodePlan
    from ddpkit.launch.outcomes import NodeOutcome
    from ddpkit.launch.ssh.fanout import NodeCommand


class Progress(Protocol):
    def waiting(self, message: str) -> None:
        """A progress line (what ddpkit is doing, or waiting for), in ddpkit's own words."""


class LaunchEvents(Progress, Protocol):
    """One node's launch (``session.execute``)."""

    def planned(self, plan: NodePlan) -> None: ...

    def output(self, line: str) -> None:
        """One line torchrun or a rank printed."""


class NodeEvents(Protocol):
    """The nodes a job supervisor runs (``fanout.supervise``)."""

    def node_line(self, node: NodeCommand, text: str) -> None:
        """One line a node printed on its stderr (its log)."""

    def node_finished(self, outcome: NodeOutcome) -> None: ...

    def stopping(self, reason: str) -> None:
        """Every node still running is being stopped, for ``reason``."""


class HostsEvents(Progress, NodeEvents, Protocol):
    """The ssh fan-out (``hosts_driver.run``): preflight progress, then its nodes."""


class JoinEvents(Progress, Protocol):
    """Token mode on the master (``join_driver.run``). Node 0's own share reports through the
    front end's own events (the driver only calls it)."""

    def warning(self, message: str) -> None:
        """Something the user should know that does not stop the job."""

    def token_ready(self, token: JoinToken, others: int, token_file: Path | None = None) -> None:
        """The job store runs: the ``others`` other machines each run ``ddpkit join TOKEN``;
        with ``token_file`` (--token-file, written already) the token, secret included, is
        there, and what is shown must not hold the secret (it lands in logs)."""

    def joined(self, node: JoinedNode, count: int, expected: int) -> None:
        """A node joined; ``count`` of the ``expected`` workers have now."""
