"""The ``local-rank-argument`` finding: a script and its launcher disagree on the old contract.

Scripts written for ``python -m torch.distributed.launch`` take their local rank as an argv option
(``--local_rank``; torch 2.x's launch passes ``--local-rank``); torchrun passes none. Certain when
argparse itself says so (``unrecognized arguments: --local-rank=0``, ``the following arguments
are required: --local_rank``); likely when a device error comes from a process whose log shows a
local rank of -1 (the usual default of such an option when nothing was passed).
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.scan import Event
from ddpkit.doctor.wording import specific_then_general
from ddpkit.i18n import _

FINDING = "local-rank-argument"


class LocalRankRule:
    def __init__(self) -> None:
        self.rejected: dict[str, set[str]] = {}  # flag the launcher passed -> scripts rejecting it
        self.required: dict[str, set[str]] = {}  # flag the script requires -> scripts
        self.arg_bag = Bag()
        self.minus_one_files: set[str] = set()
        self.minus_one_bag = Bag(2)
        self.device_files: set[str] = set()
        self.device_bag = Bag(2)
        self.device_details: set[str] = set()

    def feed(self, event: Event) -> None:
        if event.kind == "local-rank-arg":
            table = self.required if event.get("required") else self.rejected
            flag = "--" + event.get("flag").lstrip("-\u2013\u2014")  # (a typographer's dash)
            scripts = table.setdefault(flag, set())
            if len(scripts) < 8:
                scripts.add(event.get("script") or _("the script"))
            self.arg_bag.add(event)
        elif event.kind == "local-rank-minus-one" and len(self.minus_one_files) < 64:
            self.minus_one_files.add(event.file)
            self.minus_one_bag.add(event)
        elif event.kind == "device-ordinal" and len(self.device_files) < 64:
            self.device_files.add(event.file)
            self.device_bag.add(event)
            self.device_details.add(event.get("detail"))

    def finding(self) -> Finding | None:
        e = entry(FINDING)
        parts: list[str] = []
        for flag, scripts in sorted(self.rejected.items()):
            names = ", ".join(sorted(scripts))
            if flag == "--local-rank":
                parts.append(_("{names} rejected --local-rank=N: torch 2.x's "
                               "torch.distributed.launch passes the dashed spelling, and the "
                               "script declares another one (in guides usually --local_rank) or "
                               "none.", names=names))
            else:
                parts.append(_("{names} rejected {flag}=N: the launcher (torch.distributed.launch "
                               "before torch 2.0, or DeepSpeed) passes it, and the script does not "
                               "declare it (it reads LOCAL_RANK, or the dashed spelling).",
                               names=names, flag=flag))
        for flag, scripts in sorted(self.required.items()):
            parts.append(_("{names} requires {flag}, and the launcher passed none: torchrun "
                           "never passes a local-rank argument.", names=", ".join(sorted(scripts)),
                           flag=flag))
        blamed_device = sorted(self.device_files & self.minus_one_files)
        if blamed_device:
            parts.append(_("A rank failed choosing its GPU ({details}) while its local rank was "
                           "-1: the script's --local_rank default, because no launcher passed it "
                           "one.", details="; ".join(sorted(self.device_details))))
        if not parts:
            return None
        bags = [self.arg_bag.items]
        if blamed_device:
            bags += [self.device_bag.items, self.minus_one_bag.items]
        return Finding(e.id, e.severity, e.title, specific_then_general(parts, e.explanation),
                       e.fix,
                       merge(*bags))
