"""A rank selecting a GPU this machine does not have: more processes per node than GPUs.

CUDA's ``cudaErrorInvalidDevice`` (``invalid device ordinal``; error 101, 10 before CUDA 10.1)
is what ``cudaSetDevice(n)`` returns for an ``n`` at or past the device count. A launcher gives
each of its processes LOCAL_RANK 0..nproc-1 and the script selects that GPU
(``torch.cuda.set_device(local_rank)``, ``.cuda(local_rank)``): with more processes than
visible GPUs the last ranks fail so. No two ranks share a GPU there: each names one that does not
exist, so the finding is the CUDA call that failed (cuda-error), not duplicate-gpu (two ranks on
one device, which NCCL's own check reports). The facts read the error (``CUDA_ERROR``) and the
selection (``DEVICE_SELECT``: the traceback's ``set_device(...)``, torch 1.x's THCudaCheck in
``torch/csrc/cuda/Module.cpp``); the cause names it only where the lines show the selection or
several ranks, and says "most likely" when they do not show several ranks. The error alone, with
neither, is a CUDA call that failed (the catalogue's cuda-error) with its documented meaning: the
index could come from anywhere (a script's ``cuda:1`` on a one-GPU machine). A negative ordinal
(``set_device(-1)``) is the local-rank argument's, which another rule names. Ascend's runtime
reports the same with its own code (ACL_ERROR_RT_INVALID_DEVICEID, 107001, the facts' CUDA error of
that meaning with the runtime's name in its detail): the NPU's words and tools say it then.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.facts.printed import ACL_INVALID_DEVICE_NAME
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_INVALID = "cudaErrorInvalidDevice"


class DeviceOrdinal(Noting):
    needs = frozenset({FactKind.CUDA_ERROR, FactKind.DEVICE_SELECT, FactKind.WORLD_SIZE})
    specificity = 15
    supersedes = GENERIC | {"cuda-error"}
    yields_to = frozenset({"local-rank-argument", "duplicate-gpu"})  # (NCCL's check: it says more)

    def __init__(self) -> None:
        super().__init__()
        self.selected = Bag(2)  # lines that show a process selecting its GPU
        self.ranks: set[int] = set()  # the ranks the failing lines name
        self.world = 0  # the largest world size a line states
        self.npu = False  # Ascend's runtime reported it (its code, not CUDA's)

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            if fact.kind is FactKind.WORLD_SIZE and fact.value.isdigit():
                self.world = max(self.world, int(fact.value))
        if any(f.kind is FactKind.DEVICE_SELECT for f in facts):
            self.selected.add(event)
        invalid = [f for f in facts if f.kind is FactKind.CUDA_ERROR and f.value == _INVALID]
        if invalid:
            npu = any(f.detail == ACL_INVALID_DEVICE_NAME for f in invalid)
            self.npu = self.npu or npu
            self.note(event, ["invalid device id" if npu else "invalid device ordinal"])
            if event.rank is not None:
                self.ranks.add(event.rank)

    def finding(self, context: Context) -> Finding | None:
        several = self.world > 1 or len(self.ranks) > 1 or any(r > 0 for r in self.ranks)
        if not self.bag:
            return None
        severity = self.severity(context)
        if self.npu:
            return made("cuda-error", severity, _(
                "An Ascend NPU runtime call failed with invalid device id "
                "(ACL_ERROR_RT_INVALID_DEVICEID, 107001): it named an NPU index at or past the "
                "number of NPUs the process sees. Often the launcher started more processes per "
                "node than the node has NPUs, or ASCEND_RT_VISIBLE_DEVICES lists fewer NPUs than "
                "the index assumes (a process numbers the NPUs it sees from 0)."),
                _npu_fix(), merge(self.bag.items, self.selected.items))
        if not (self.selected or several):
            return made("cuda-error", severity, _(
                "A CUDA call failed with invalid device ordinal (cudaErrorInvalidDevice): it "
                "named a GPU index at or past the number of GPUs the process sees. Often the "
                "launcher started more processes per node than the node has GPUs (or than "
                "CUDA_VISIBLE_DEVICES lists); the lines do not show where the index came from."),
                _("{fix}\nand check the index the script passes itself (cuda:N, device_map)",
                  fix=_fix()), merge(self.bag.items))
        if several:
            text = _("A rank selecting its GPU failed with CUDA's invalid device ordinal: this "
                     "node started more ranks than it has GPUs (or than CUDA_VISIBLE_DEVICES "
                     "lists), so the last local ranks name GPUs that do not exist.")
        else:
            text = _("A process selecting its GPU failed with CUDA's invalid device ordinal: the "
                     "GPU index it asked for does not exist on this machine. Most likely the "
                     "launcher started more processes per node than the node has GPUs (or "
                     "than CUDA_VISIBLE_DEVICES lists).")
        fix = _fix()
        evidence = merge(self.bag.items, self.selected.items)
        return made("cuda-error", severity, text, fix, evidence)


def _fix() -> str:
    return _("Count the GPUs the processes see: nvidia-smi -L (and echo "
             "$CUDA_VISIBLE_DEVICES), then start at most that many per node:\n"
             "  ddpkit launch --nproc-per-node <that count> train.py   (torchrun: "
             "--nproc_per_node)\n"
             "and select each rank's GPU by its local rank: "
             "torch.cuda.set_device(int(os.environ['LOCAL_RANK']))")


def _npu_fix() -> str:
    return _("Count the NPUs the processes see: npu-smi info (and echo "
             "$ASCEND_RT_VISIBLE_DEVICES), then start at most that many per node:\n"
             "  ddpkit launch --nproc-per-node <that count> train.py   (torchrun: "
             "--nproc_per_node)\n"
             "and select each rank's NPU by its local rank: "
             "torch.npu.set_device(int(os.environ['LOCAL_RANK']))")
