"""Code that asks torch for a name this torch release does not have: version-mismatch.

Python reports a module attribute that is not there as AttributeError "module 'torch.distributed'
has no attribute '_all_gather_base'", an import of one as ImportError "cannot import name
'X' from 'torch.distributed.fsdp' (<path>)" (CPython 3.7 on), and a submodule that is not there as
ModuleNotFoundError "No module named 'torch.distributed.elastic'" (CPython 3.6 on; torch's compiled
core ``torch._C`` missing is a broken install or a torch source tree, not this). In torch's own
namespace that is code written for another torch release: a library built or released for an
older torch calling an API torch has since renamed or removed (apex's ``_all_gather_base``,
torch's private names), or code that needs a newer torch than the node has. Every rank that
imports it fails the same way. A module "partially initialized" by a circular import (a script of
the user's named torch.py) is not this (the facts leave it out).
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.log.causes.base import NotingValues
from ddpkit.doctor.log.facts.kinds import FactKind
from ddpkit.i18n import _


class TorchApiMissing(NotingValues):
    needs = frozenset({FactKind.TORCH_API_MISSING})
    specificity = 15
    finding_id = "version-mismatch"
    supersedes = GENERIC | {"invalid-usage"}

    def words(self) -> tuple[str, str]:
        text = _("The code asks torch for {names}, which this torch release does not have: it "
                 "was written for another release (a library made for an older torch calling "
                 "an API torch has renamed or removed, or code that needs a newer torch).",
                 names=self.listed)
        fix = _("Install the library's release made for this torch (or build it from source "
                "against it), or the torch release the code was written for: python -c "
                "\"import torch; print(torch.__version__)\" shows which one runs. Every node "
                "needs the same builds.")
        return text, fix
