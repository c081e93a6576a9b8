"""NCCL older than 2.17 loaded under a program built against NCCL 2.17 or newer.

NCCL 2.17 (``src/nccl.h.in``, v2.17.1-1) made ``NCCL_CONFIG_INITIALIZER`` set ``blocking`` (and
the attributes after it) to ``NCCL_CONFIG_UNDEF_INT``, INT_MIN, meaning "NCCL's default". NCCL
2.14 to 2.16 (``src/init.cc``, ``parseCommConfig``) accept only 0 and 1: ``Invalid config blocking
attribute value -2147483648`` and ncclInvalidArgument. So the caller (torch's ProcessGroupNCCL,
vLLM's pynccl) was built with a newer NCCL than the one the process loaded: usually a second,
older NCCL (a pip ``nvidia-nccl-cu*`` package, a system libnccl, LD_LIBRARY_PATH) found first.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class ConfigUndefined(Noting):
    needs = frozenset({FactKind.UNDEF_CONFIG, FactKind.VERSION})
    specificity = 20
    supersedes = GENERIC | {"invalid-usage"}

    def __init__(self) -> None:
        super().__init__()
        self.loaded: dict[str, None] = {}  # the NCCL versions the lines name
        self.versions = Bag(2)

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        nccl = [f.value for f in facts if f.kind is FactKind.VERSION and f.detail == "nccl"]
        if nccl and len(self.loaded) < 3:
            self.loaded.update(dict.fromkeys(nccl))
            self.versions.add(event)
        undefined = [f.value for f in facts if f.kind is FactKind.UNDEF_CONFIG]
        if undefined:
            self.note(event, undefined)

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text = [_("NCCL rejected the communicator config's {attributes} value -2147483648 "
                  "(NCCL_CONFIG_UNDEF_INT): the program was built against NCCL 2.17 or newer, "
                  "whose config initializer writes that value, but the process loaded an NCCL "
                  "older than 2.17, which takes it for an invalid value.",
                  attributes=self.listed)]
        if self.loaded:
            text.append(_("The NCCL the process loaded: {versions}.",
                          versions=", ".join(self.loaded)))
        fix = _("Find the NCCL libraries the environment holds and keep one, the version torch "
                "was built with:\n"
                "  python -c \"import torch; print(torch.cuda.nccl.version())\"\n"
                "  pip list 2>/dev/null | grep -i nccl; ldconfig -p | grep libnccl; "
                "echo $LD_LIBRARY_PATH\n"
                "Remove the older package (or the path to it), or upgrade it to at least that "
                "version.")
        return made("version-mismatch", "error", text, fix,
                    merge(self.bag.items, self.versions.items))
