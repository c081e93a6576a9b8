"""A /dev/shm too small for the run, as a program that measured it says.

Ray checks /dev/shm's free space as it starts its object store and, when it is smaller than the
store, puts the store in /tmp and warns (the facts' ``SHM_AVAILABLE``: "/dev/shm has only N
bytes available. This will harm performance! ... If you are inside a Docker container, you can
increase /dev/shm size by passing '--shm-size=...'"). A container started without --shm-size or
--ipc=host has Docker's default of 64 MB there. The same tmpfs holds NCCL's buffers between the
GPUs of one machine and the tensors DataLoader workers hand over, which outgrow it: NCCL then
fails or hangs, and workers die with a bus error. The line is a warning and says nothing failed,
so the finding is a warning too, ranked below any error the logs show.
"""

from __future__ import annotations

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.causes.shm_full import size_first_fix
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_MIB = 1 << 20


class ShmSmall(Noting):
    needs = frozenset({FactKind.SHM_AVAILABLE})
    specificity = 5
    supersedes = frozenset({"no-result"})  # (a run that stops: not one that failed otherwise)

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        self.note(event, [_size(int(f.value)) for f in facts if f.kind is FactKind.SHM_AVAILABLE])

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text = _("Ray found only {size} free in /dev/shm and put its object store in /tmp "
                 "instead. NCCL keeps its buffers between a machine's GPUs in the same /dev/shm, "
                 "and DataLoader workers their tensors: when they outgrow it, NCCL fails or hangs "
                 "and workers die with a bus error. Ray's line is a warning; if the run stopped "
                 "or failed without another cause, this is the likely one.", size=self.listed)
        return made("shm", "warning", text, size_first_fix(), merge(self.bag.items))


def _size(available: int) -> str:
    """Bytes as a reader counts them: MiB, or bytes below one."""
    return f"{available // _MIB} MiB" if available >= _MIB else f"{available} bytes"
