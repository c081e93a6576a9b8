"""No space left in /dev/shm: shared memory is full.

ENOSPC (28, "No space left on device") on a path in /dev/shm (the facts' ``ERRNO`` beside a
``SHM_PATH``), whatever printed it: Python's ``OSError: [Errno 28] No space left on device:
'/dev/shm/...'``, a library's own words with strerror's text. /dev/shm is a tmpfs; a
container's default is 64 MB, which NCCL's buffers and DataLoader workers' tensors outgrow.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC, entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import ERRNO_BY_NAME, Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_ENOSPC = str(ERRNO_BY_NAME["ENOSPC"])


class ShmFull(Noting):
    needs = frozenset({FactKind.SHM_PATH})
    specificity = 20
    supersedes = GENERIC

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        if any(f.kind is FactKind.ERRNO and f.value == _ENOSPC for f in facts):
            self.note(event, [f.value for f in facts if f.kind is FactKind.SHM_PATH])

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text = _("Writing {paths} failed with No space left on device (ENOSPC): /dev/shm is "
                 "full.", paths=self.listed)
        return made("shm", "error", text, size_first_fix(), merge(self.bag.items))


def size_first_fix() -> str:
    """The shm fix, led by the look at /dev/shm's size that tells whether it is a container's."""
    return _("Check the size first: df -h /dev/shm (a container's default is 64M)\n{fix}",
             fix=entry("shm").fix)
