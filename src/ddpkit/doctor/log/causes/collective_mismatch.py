"""Ranks issuing different collectives, as torch's debug wrapper caught them.

With ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` (torch 1.10 on) every collective first compares its
fingerprint across the ranks (torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp): "Detected
mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint(
OpType=ALLREDUCE, ...), but Rank 1 is running collective: CollectiveFingerPrint(OpType=
BROADCAST, ...)." (the facts' ``COLLECTIVE_MISMATCH``). Without the wrapper the same program
hangs until the collective timeout: the ranks took different paths through the code (a
condition true on one rank only, a loop of a different length, a rank that skipped a batch).
Over Gloo a mismatch of sizes is caught without the wrapper: the receiving rank's check that the
bytes sent fit the buffer its collective posted fails (the facts' ``GLOO_SIZE_MISMATCH``). A
program's own collective may check it too: fairseq's all_gather_list, which cannot read what the
others sent when they entered it at another step ("the workers have fallen out of sync", the
facts' ``RANKS_OUT_OF_STEP``).
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.log.causes.base import NotingValues
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class CollectiveMismatch(NotingValues):
    needs = frozenset({FactKind.COLLECTIVE_MISMATCH, FactKind.RANKS_OUT_OF_STEP})
    specificity = 20
    finding_id = "collective-timeout"
    supersedes = GENERIC | {"internal-error", "invalid-usage"}

    def __init__(self) -> None:
        super().__init__()
        self.sizes = ""  # Gloo's "<bytes sent> vs <bytes expected>", where Gloo caught it
        self.out_of_step: str | None = None  # the program's collective that found it, if named

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        mismatches = [f for f in facts if f.kind is FactKind.COLLECTIVE_MISMATCH]
        self.sizes = self.sizes or next((f.detail for f in mismatches if f.detail), "")
        for fact in facts:
            if fact.kind is FactKind.RANKS_OUT_OF_STEP and not self.out_of_step:
                self.out_of_step = fact.value
        self.note(event, [f.value for f in mismatches if f.value])

    def words(self) -> tuple[str, str]:
        # (torch's wrapper and Gloo's check name the calls; a program's own check only says so)
        only_out_of_step = self.out_of_step is not None and not self.values and not self.sizes
        if only_out_of_step:
            text = (_("The program's own collective ({call}) found that the ranks did not enter "
                      "it together: one rank read what its peers sent for another call, so the "
                      "ranks had fallen out of step.", call=self.out_of_step)
                    if self.out_of_step else
                    _("The program's own check found that the ranks had fallen out of step: "
                      "they did not enter its collectives together."))
        elif self.values:
            text = _("The ranks called different collectives at the same step ({ops}): torch's "
                     "debug wrapper compared them and stopped the job before it hung.",
                     ops=self.listed)
        elif self.sizes:
            text = _("A rank received more data than the collective it was running expects "
                     "(Gloo's check: {sizes} bytes): the ranks ran different collectives at the "
                     "same step, or the same one on tensors of different sizes.",
                     sizes=self.sizes)
        else:
            text = _("The ranks called different collectives at the same step: torch's debug "
                     "wrapper compared them and stopped the job before it hung.")
        if only_out_of_step:
            return text, _(
                "Every rank must call the same collectives in the same order: look for a "
                "condition that holds on some ranks only (rank == 0 around a collective, an "
                "early stop or a skipped batch decided per rank, data of different lengths per "
                "rank: DistributedSampler(drop_last=True)), and for a rank that ran out of memory "
                "and skipped its step (an out-of-memory line on any rank).")
        fix = _("Every rank must call the same collectives in the same order: look for a "
                "condition that holds on some ranks only (rank == 0 around a collective, an "
                "early stop or a skipped batch decided per rank, data of different lengths "
                "per rank: DistributedSampler(drop_last=True)); the fingerprints in the message "
                "name the two calls.")
        return text, fix
