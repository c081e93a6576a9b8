"""A process killed by SIGKILL with nothing failing first: most likely the kernel's OOM killer.

SIGKILL cannot be caught, so the killed process says nothing; only whoever waited on it reports
the death, each in its own words (the facts' ``DEATH``): torchelastic's ``exitcode: -9`` and
``Signal 9 (SIGKILL) received by PID``, DeepSpeed's launcher's ``exits with return code = -9``,
Python's ``died with <Signals.SIGKILL: 9>`` (accelerate's launcher), torch.multiprocessing's
``terminated with signal SIGKILL``, the shell's and srun's ``Killed``, Open MPI's ``exited on
signal 9`` and hydra's ``Killed (signal 9)``. When no other rule found a failure
that explains it, the usual sender is the kernel's OOM killer reclaiming host memory (a
scheduler or a user can send it too): named as the most likely cause, with the check that
confirms it first.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC, ORDER
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import BEFORE_TEARDOWN, Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _
from ddpkit.wording import lines

# A failure the rules name (an exception they read, NCCL's errors, a timeout...) says more.
# (The table feeds a cause only the lines that carry a fact, so "nothing failed first" is read
# as "no rule named a failure".)
SAYS_MORE = frozenset(ORDER) - GENERIC - {"out-of-memory"}
# what a killed rank's peers report after it: their connection to it lost, their collective with
# it timed out. Where the launcher reports the kill before it stops the others (BEFORE_TEARDOWN),
# the launcher did not send it, and these are what the death left the peers: the kill explains
# them.
AFTERMATH = frozenset({"connection-lost", "collective-timeout"})


def oom_killer_check() -> str:
    """The check that tells the kernel's OOM killer from another sender of SIGKILL."""
    return _("Confirm on that machine first: dmesg -T | grep -i -E 'killed process|out of "
             "memory' (a scheduler's kill shows in its own log instead)")


class SilentKill(Cause):
    """Ahead of the rank it killed (``rank-failed`` stays, the death's own finding); a lost
    connection beside it is a failure the cause cannot order against the kill, so it gives way
    (the rank-failed finding then names the kill, the OOM killer in its fix)."""

    needs = frozenset({FactKind.DEATH})
    specificity = 10
    supersedes = GENERIC - {"rank-failed"}
    yields_to = SAYS_MORE
    signal = "SIGKILL"  # the death it reads

    def __init__(self) -> None:
        self.bag = Bag()
        self.first = False  # the launcher reported the kill before it stopped the others

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        deaths = [f for f in facts if f.kind is FactKind.DEATH and f.value == self.signal]
        if deaths:
            self.bag.add(event)
        if any(f.detail == BEFORE_TEARDOWN for f in deaths) and not self.first:
            self.first = True  # (the peers' lost connections and timeouts are its aftermath)
            self.supersedes = type(self).supersedes | AFTERMATH
            self.yields_to = type(self).yields_to - AFTERMATH

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text = [_("A process was killed by SIGKILL (signal 9; torchrun's exitcode -9), which "
                  "its launcher reports before it stops the others, so the launcher did not send "
                  "it: the other ranks' lost connections and timeouts are what its death left "
                  "them.") if self.first
                else
                _("A process was killed by SIGKILL (signal 9; torchrun's exitcode -9), and no "
                  "other failure in the log explains it."),
                _("SIGKILL cannot be caught, so the killed process prints nothing; it is most "
                  "likely the kernel's OOM killer reclaiming host memory (RAM, not the GPU's), "
                  "though a scheduler or a user can send it too.")]
        fix = lines([oom_killer_check(),
                     _("If it was the OOM killer: use less host memory per rank (fewer "
                       "DataLoader workers, load the checkpoint on one rank or with mmap, no "
                       "tensors kept on the CPU across steps), or give the job more RAM.")])
        return made("out-of-memory", "error", text, fix, merge(self.bag.items))
