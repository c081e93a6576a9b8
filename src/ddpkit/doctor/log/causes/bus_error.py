"""A process that died of SIGBUS with nothing failing first: shared memory (/dev/shm) ran out.

A write to a page of a file mapped from tmpfs that the full tmpfs cannot back raises SIGBUS,
not an error return (mmap(2)): NCCL's buffers and DataLoader workers' tensors live in
/dev/shm, and a container's default /dev/shm is 64 MB. The death is reported by whoever waited
on the process (the facts' ``DEATH``): DeepSpeed's launcher's ``exits with return code = -7``,
torchelastic's ``exitcode: -7``, Python's ``died with <Signals.SIGBUS: 7>``,
torch.multiprocessing's ``terminated with signal SIGBUS``, the shell's ``Bus error``.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, made
from ddpkit.doctor.log.causes.silent_kill import SAYS_MORE, SilentKill
from ddpkit.doctor.log.evidence import merge
from ddpkit.i18n import _


class BusError(SilentKill):
    """The silent kill's twin for SIGBUS: ahead of the rank it ended, giving way to a failure a
    rule names (a CUDA out of memory first says more than the bus error after it)."""

    yields_to = (SAYS_MORE | {"out-of-memory"}) - {"shm"}
    signal = "SIGBUS"

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text = _("A process died of SIGBUS (signal 7; torchrun's exitcode -7), and no other "
                 "failure in the log explains it: most likely shared memory (/dev/shm) ran out, "
                 "since a write to shared memory that the full /dev/shm cannot hold raises "
                 "SIGBUS, not an error.")
        fix = _("Check the size first: df -h /dev/shm (a container's default is 64M)\n{fix}",
                fix=entry("shm").fix)
        return made("shm", "error", text, fix, merge(self.bag.items))
