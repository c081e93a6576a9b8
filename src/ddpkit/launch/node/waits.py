"""What one node is waiting for while torchrun runs, said at its start and every ~10 s.

torchrun is silent while it waits: for the other nodes in its rendezvous (up to --rdzv-timeout,
600 s by default), and, once this node's ranks have finished, in its exit barrier for the other
nodes' ranks (up to 300 s, torch's ``exit_barrier_timeout``, not a torchrun flag). Without a line
a user cannot tell a wait from a hang. The phase is read from what the poll loop of
:func:`ddpkit.launch.torchrun.processes.run_process` sees (:class:`ProcessState`): no rank started
yet is the rendezvous; ranks started and none alive while torchrun still runs is the exit barrier.

Pure: :class:`WaitAnnouncer` takes the states and the clock and returns the lines; the session
sends them through its events (``waiting``), the CLI renders them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ddpkit.i18n import _, _n
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.torchrun.processes import ProcessState

WaitPhase = Literal["rendezvous", "exit-barrier"]
RENDEZVOUS: WaitPhase = "rendezvous"
EXIT_BARRIER: WaitPhase = "exit-barrier"
FIRST_S = 5.0  # a phase this old gets its first line (a normal exit barrier ends before it)
EVERY_S = 10.0  # then one line per this many seconds
EXIT_BARRIER_TIMEOUT_S = 300  # torch.distributed.elastic's SimpleElasticAgent default


def phase_of(state: ProcessState) -> WaitPhase | None:
    """The wait torchrun is in, or None while ranks run (the hang watcher's part)."""
    if not state.started_children:
        return RENDEZVOUS
    if state.alive_children == 0:
        return EXIT_BARRIER
    return None


@dataclass
class WaitAnnouncer:
    """Turns the run's states into status lines: the first ``FIRST_S`` into a phase, then every
    ``EVERY_S``; ``describe(phase, seconds in it)`` words them."""

    describe: Callable[[WaitPhase, float], str | None]
    first_s: float = FIRST_S
    every_s: float = EVERY_S
    running: Callable[[float], str | None] | None = None  # what ranks are doing (``ddpkit test``)
    _phase: WaitPhase | None = None
    _since: float = 0.0
    _next: float = 0.0

    def observe(self, state: ProcessState, now: float) -> str | None:
        phase = phase_of(state)
        if phase != self._phase:
            self._phase, self._since = phase, now
            # the rendezvous starts with torchrun: its clock is torchrun's own
            if phase == RENDEZVOUS:
                self._since = now - state.elapsed_s
            self._next = self._since + self.first_s
        if (phase is None and self.running is None) or now < self._next:
            return None
        self._next = now + self.every_s
        if phase is None and self.running is not None:
            return self.running(now - self._since)
        return self.describe(phase or RENDEZVOUS, now - self._since)


def describe_wait(config: LaunchConfig, *, master_answered: Callable[[], bool] | None = None,
                  torch_saw: Callable[[], str | None] | None = None
                  ) -> Callable[[WaitPhase, float], str | None]:
    """The words for one node's waits. ``master_answered`` (a worker's probe): until it is true
    a worker waits for the master itself, which its probe reports already. ``torch_saw``: what
    torchrun's own store client last met trying the master (``refused``, ``no route to host``;
    read from its log lines, which the console no longer shows)."""
    where = f"{config.master_addr}:{config.master_port}"
    others = config.nnodes - 1

    def describe(phase: WaitPhase, seconds: float) -> str | None:
        if phase == EXIT_BARRIER:
            if not config.multi_node:
                return None
            return _n("this node's ranks have finished; torchrun waits for the other node to "
                      "finish theirs (its exit barrier, up to {limit} s): {seconds:.0f} s so far",
                      "this node's ranks have finished; torchrun waits for the other {count} "
                      "nodes to finish theirs (its exit barrier, up to {limit} s): {seconds:.0f} "
                      "s so far", others, limit=EXIT_BARRIER_TIMEOUT_S, seconds=seconds)
        if not config.multi_node:
            return None
        if master_answered is not None and not master_answered():
            why = torch_saw() if torch_saw is not None else None
            if why:
                return _("still waiting for the master {where} to answer: {why}, {seconds:.0f} s "
                         "of --connect-timeout {timeout:g} s", where=where, why=why,
                         seconds=seconds, timeout=config.connect_timeout)
            return _("still waiting for the master {where} to answer: {seconds:.0f} s of "
                     "--connect-timeout {timeout:g} s", where=where, seconds=seconds,
                     timeout=config.connect_timeout)
        if config.is_master:
            ranks = "1" if others == 1 else f"1..{others}"
            return _n("waiting for the other node (node rank {ranks}) to join the rendezvous at "
                      "{where}: {seconds:.0f} s of --rdzv-timeout {timeout} s",
                      "waiting for the other {count} nodes (node rank {ranks}) to join the "
                      "rendezvous at {where}: {seconds:.0f} s of --rdzv-timeout {timeout} s",
                      others, ranks=ranks, where=where, seconds=seconds,
                      timeout=config.rdzv_timeout)
        return _("the master {where} answered; waiting for every node to join the rendezvous: "
                 "{seconds:.0f} s of --rdzv-timeout {timeout} s", where=where, seconds=seconds,
                 timeout=config.rdzv_timeout)

    return describe
