"""torch.distributed's own consistency check failing: internal-error.

TORCH_INTERNAL_ASSERT (c10/util/Exception.cpp) raises "<condition> INTERNAL ASSERT FAILED at
<file>:<line>, please report a bug to PyTorch. <message>": a state torch's own code should never
reach, not a check of what the program handed it (those are TORCH_CHECK's, invalid-usage). Where
the file is torch.distributed's (c10d: the reducer, the process groups, the store), that is the
catalogue's ``internal-error``: a bug, or builds that do not fit together (an extension or a
wrapper written for another torch release that drives torch's internals, mismatched versions
across ranks). An assertion in the rest of torch names no cause of this table, and stays the
rank's failure.
"""

from __future__ import annotations

from ddpkit.doctor.log.causes.base import InternalError
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_DISTRIBUTED = ("/distributed/", "/c10d/", "c10d/", "ProcessGroup", "gloo/")


class InternalAssert(InternalError):
    needs = frozenset({FactKind.INTERNAL_ASSERT})

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        files = [f.value for f in facts if f.kind is FactKind.INTERNAL_ASSERT
                 and any(part in f.value for part in _DISTRIBUTED)]
        if files:
            self.note(event, files)

    def words(self) -> tuple[str, str]:
        text = _("torch.distributed's own consistency check failed ({files}): torch reached a "
                 "state its code should never reach, which is not a check of what the program "
                 "handed it.", files=self.listed)
        fix = _("Check that every rank runs the same torch build, and that any library driving "
                "DDP's or c10d's internals (a wrapper of DistributedDataParallel, an extension "
                "such as mmcv's) was made for this torch release: upgrade it, or use the torch "
                "it was made for.\nIf they all fit, it is a bug: report it to PyTorch with the "
                "lines above it.")
        return text, fix
