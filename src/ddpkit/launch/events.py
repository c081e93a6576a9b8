"""What a front end is told while ddpkit runs one node or a whole job: the events protocols.

Nothing under ``launch/`` prints. The code that runs a node, supervises the nodes of a job or
drives a whole job reports through a protocol instead; the CLI implements them with its renderer,
tests with recorders. Each protocol lives beside the code that calls it, in its layer; they form
one family whose root is here:

===========================================  ==================================================
:class:`Progress` (here)                     ``waiting(message)``: what ddpkit does or waits for
``node.session.LaunchEvents``                one node's launch: its plan, then every line
                                             torchrun and its ranks print
``ssh.fanout.NodeEvents``                    the nodes a job supervisor runs: their lines, their
                                             ends, the stop order
``ssh.driver.HostsEvents``                   the ssh fan-out: its preflight progress and its nodes
``join.driver.JoinEvents``                   token mode on the master: the token, each node that
                                             joins, warnings
===========================================  ==================================================
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def waiting(self, message: str) -> None:
        """A progress line (what ddpkit is doing, or waiting for), in ddpkit's own words."""
