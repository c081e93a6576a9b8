"""torchrun's agent at its exit barrier, as its log shows it.

The agent enters its exit barrier only after this node's workers succeeded
(torch/distributed/elastic/agent/server/api.py, ``_invoke_run``: a failed worker group restarts
or returns without it) and waits there for every node's agent (``_exit_barrier``:
store_util.barrier on the job's store). When the wait fails it logs "Error waiting on exit
barrier. Elapsed: %s seconds" with ``logger.exception`` (every line of the message and of the
traceback under one glog header) and returns the run's result all the same:

- after a fraction of a second, the master's agent had finished and closed the job's store
  under this one (``DistNetworkError: Failed to recv ... Connection was likely closed``): the
  job succeeded, and nothing here failed;
- after the barrier's timeout (300 s), some node's agent never arrived: this node waited.

Either way the exception its traceback ends with is no rank's failure, and the block is hidden
from the rules that read failures; a wait that ran out keeps its message line, which the message
catalogue files as stopped-while-waiting.
"""

from __future__ import annotations

from ddpkit.doctor.log.scan import Event
from ddpkit.launch.torchrun.torch_log import BARRIER_ELAPSED, BARRIER_GAVE_UP_S, CPP_RECORD


class ExitBarrierLines:
    """Feed it every event; it says which belong to an exit barrier's logged failure."""

    def __init__(self) -> None:
        self.blocks: dict[tuple[str, str], bool] = {}  # (file, glog header) -> gave up

    def hides(self, event: Event) -> bool:
        if "] " not in event.text or (record := CPP_RECORD.match(event.text)) is None:
            return False
        where = (event.file, record.group("key"))
        if (elapsed := BARRIER_ELAPSED.search(record.group("message"))) is not None:
            gave_up = float(elapsed.group(1)) >= BARRIER_GAVE_UP_S
            if where in self.blocks or len(self.blocks) < 64:
                self.blocks[where] = gave_up
            return not gave_up  # (the master's store closed after a job that succeeded)
        return where in self.blocks  # (a line of the barrier's logged traceback)
