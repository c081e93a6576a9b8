"""NCCL failing to bind NVLink SHARP (NVLS) multicast memory: the Fabric Manager or the NVSwitches.

On machines whose GPUs an NVSwitch joins (HGX H100/H200/B200), NCCL 2.17 and later build NVLS
communicators on CUDA's multicast objects. Binding a GPU's memory to the multicast group
(cuMulticastBindMem) is where a broken NVLS setup shows (NCCL's comment in src/transport/nvls.cc):
NCCL warns "Failed to bind NVLink SHARP (NVLS) Multicast memory of size %ld : CUDA error %d '%s'.
This is usually caused by a system or configuration error in the Fabric Manager or NVSwitches.
Disable NVLS (NCCL_NVLS_ENABLE=0) if you wish to avoid this error in the future." and fails with
ncclUnhandledCudaError (2.29 on; 2.27 and 2.28 went on without NVLS, "Proceeding without NVLS
support.", an info line). Whatever CUDA's error says (401 'the operation cannot be performed in
the present state', 2 'out of memory' where the multicast objects ran out), it is this CUDA call
failing: cuda-error, not the GPU's memory running out, and not CUDA peer-to-peer.
"""

from __future__ import annotations

import re

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact
from ddpkit.doctor.log.kinds import EventKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_BIND = "NVLink SHARP (NVLS) Multicast memory"
_ADVICE = "Disable NVLS (NCCL_NVLS_ENABLE=0)"
_WENT_ON = "Proceeding without NVLS support"  # (2.27 and 2.28: an info line, nothing failed)
_CUDA = re.compile(r"CUDA error (-?\d{1,5}) '([^'\n]{1,120})'")


class NvlsBind(Cause):
    kinds = frozenset({EventKind.JOB_FACT, EventKind.FAILURE_LINE, EventKind.NCCL_WARN})
    specificity = 25
    supersedes = GENERIC | {"out-of-memory", "p2p"}

    def __init__(self) -> None:
        self.bag = Bag()
        self.error = ""  # CUDA's error as NCCL quoted it

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        text = event.text
        if (_BIND in text or _ADVICE in text) and _WENT_ON not in text:
            self.bag.add(event)
        cuda = _CUDA.search(text) if not self.error else None
        if cuda and (self.bag or _BIND in text):
            self.error = f"{cuda.group(1)} '{cuda.group(2)}'"

    def finding(self, context: Context) -> Finding | None:
        if not self.bag or not context.failed:
            return None
        error = self.error or "?"
        text = _("NCCL could not bind NVLink SHARP (NVLS) multicast memory (CUDA error {error}), "
                 "which NCCL says is usually a system or configuration error in the Fabric "
                 "Manager or the NVSwitches: the NVSwitch fabric of this machine is not in "
                 "order, whatever error CUDA names (an 'out of memory' here is the multicast "
                 "objects, not the GPU's memory).",
                 error=error)
        fix = _("Check the Fabric Manager: systemctl status nvidia-fabricmanager (its version "
                "must match the driver's), and nvidia-smi -q | grep -A2 -i fabric (State "
                "Completed, Status Success); restart it or the machine if not. To run without "
                "NVLS meanwhile, set NCCL_NVLS_ENABLE=0 on every rank.")
        return made("cuda-error", "error", text, fix, merge(self.bag.items))
