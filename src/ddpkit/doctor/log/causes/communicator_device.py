"""A tensor handed to an NCCL communicator bound to another GPU.

vLLM's PyNcclCommunicator (vllm/distributed/device_communicators/pynccl.py; SGLang and other
projects copy it) is bound to the device that was current when it was created, and asserts
before every collective that the tensor is on it: "this nccl communicator is created to work on
cuda:1, but the input tensor is on cuda:0" (the facts' ``DEVICE_MISMATCH``). NCCL itself would
read the other GPU's memory as its own ("illegal memory access"), so the call is refused: the
process created the communicator, or the tensor, while another GPU was its current device.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class CommunicatorDevice(Noting):
    needs = frozenset({FactKind.DEVICE_MISMATCH})
    specificity = 20
    supersedes = GENERIC | {"cuda-error", "internal-error"}

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        self.note(event, [_("communicator on {bound}, tensor on {given}", bound=f.value,
                            given=f.detail) if f.detail else _("communicator on {bound}",
                                                              bound=f.value)
                          for f in facts if f.kind is FactKind.DEVICE_MISMATCH])

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        text = _("An NCCL communicator bound to one GPU was handed a tensor on another "
                 "({devices}): the process created the communicator, or "
                 "the tensor, while another GPU was its current device, and the call was "
                 "refused before NCCL could read the wrong GPU's memory.", devices=self.listed)
        fix = _("Select each process's GPU before anything else touches CUDA: "
                "torch.cuda.set_device(local_rank) first, then create the communicator and the "
                "tensors (tensor.to(f\"cuda:{local_rank}\")); code that loops over devices "
                "must set the current device back afterwards.")
        return made("invalid-usage", "error", text, fix, merge(self.bag.items))
