"""A rank that ended without a word while its peers lost their connection.

torchrun's ``--log-dir`` keeps each rank's stderr in a file of its own (``attempt_N/<local
rank>/stderr.log``). Python prints an uncaught exception there before it exits; a process that
ends otherwise prints nothing: killed by a signal (the kernel's OOM killer, ``kill -9``, a
scheduler), crashed in native code (a segmentation fault: Python's faulthandler is off by
default), or returned early without an error. Its peers then read a closed connection. So an
empty stderr.log beside another rank's lost connection (the file edge's ``SILENT_RANK_LOG``,
run_dir.silent_rank_logs) names the process that most likely went first. Which of the three
it was is not in these files: torchrun's console (its ``Failures:`` table) holds the exit code.
A rank's own exception elsewhere (own_failure.py) says more, and this finding yields to it.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import FEW, Cause, Context, made, others_first
from ddpkit.doctor.log.evidence import Bag
from ddpkit.doctor.log.facts.kinds import Fact
from ddpkit.doctor.log.kinds import EventKind
from ddpkit.doctor.log.run_dir import attempt_folder
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _, _n


class EmptyRankLog(Cause):
    kinds = frozenset({EventKind.SILENT_RANK_LOG, EventKind.CONNECTION_LOST})
    # below a rank's own exception (own_failure.py, rank-failed 40 + 10); the lost connection
    # it explains is dropped; the launcher's own report of that rank (torchrun's Failures:
    # table, read as rank-failed by the rules) says more, and this gives way to it
    specificity = 0
    supersedes = (GENERIC - {"rank-failed"}) | {"connection-lost"}
    yields_to = others_first("rank-failed") - {"connection-lost"}

    def __init__(self) -> None:
        self.silent: dict[int, str] = {}  # local rank -> its empty stderr.log
        self.lost = Bag(FEW)
        # the attempts whose ranks lost a peer (None: a line of no attempt's file, the console)
        self.lost_in: set[str | None] = set()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        if event.kind == EventKind.SILENT_RANK_LOG:
            if len(self.silent) < FEW:
                self.silent.setdefault(int(event.get("local_rank")), event.file)
        else:
            self.lost.add(event)
            if len(self.lost_in) < FEW:
                self.lost_in.add(attempt_folder(event.file))

    def finding(self, context: Context) -> Finding | None:
        # a silent rank of the attempt whose peer was lost (a later attempt's silent rank was
        # stopped by torchrun while it waited, or never reached what failed)
        if None not in self.lost_in:
            self.silent = {rank: path for rank, path in self.silent.items()
                           if attempt_folder(path) in self.lost_in}
        if not self.silent or not self.lost:
            return None
        ranks = sorted(self.silent)
        first = ranks[0]
        text = _n("Local rank {ranks}'s stderr ({file}) is empty: that process printed no error "
                  "before it ended, while another rank lost its connection to a peer. A process "
                  "ends without a word when it is killed by a signal (the kernel's OOM killer, "
                  "kill -9, a scheduler), crashes in native code (a segmentation fault) or "
                  "returns early without an error; the others then read a closed connection.",
                  "Local ranks {ranks} left their stderr ({file} and the others) empty: those "
                  "processes printed no error before they ended, while another rank lost its "
                  "connection to a peer. A process ends without a word when it is killed by a "
                  "signal (the kernel's OOM killer, kill -9, a scheduler), crashes in native code "
                  "(a segmentation fault) or returns early without an error; the others then "
                  "read a closed connection.", len(ranks),
                  ranks=", ".join(map(str, ranks)), file=self.silent[first])
        fix = _("Find how local rank {rank} ended: torchrun's console names its exit code in its "
                "'Failures:' table (-9 is SIGKILL, on a machine short of memory the OOM killer: "
                "dmesg | grep -i 'killed process'; -11 is a segmentation fault; 0 is an early "
                "return: every rank must make the same collective calls).", rank=first)
        return made("rank-failed", "error", text, fix, tuple(self.lost.items))
