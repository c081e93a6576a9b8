"""A tensor autograd saved for the backward pass, changed in place before backward ran.

Autograd keeps a version counter on every tensor and checks it when the backward pass unpacks
what the forward pass saved (torch/csrc/autograd/saved_variable.cpp, SavedVariable::unpack,
v1.5 to v2.x): "one of the variables needed for gradient computation has been modified by an
inplace operation: [<type> <sizes>], which is output <n> of <grad_fn>, is at version <v>;
expected version <v-1> instead." The ", which is output ... of <grad_fn>," part is printed only
for a tensor that has a grad_fn; without it the tensor is a leaf: a parameter or a buffer.

What the line itself tells apart:

- An output of an operation (a grad_fn named): the program changed a result in place (an
  ``inplace=True`` activation, ``x += y``, an indexed assignment) after something saved it.
- A leaf of one dimension: the shape of a BatchNorm's running statistics. Under
  DistributedDataParallel, ``broadcast_buffers=True`` (its default; ``forward_sync_buffers``
  from torch 2.13) copies rank 0's buffers into every rank's in place at the start of each
  forward, so a second forward before the first's backward (a GAN's discriminator run on real
  and fake images, two towers) changes what the first saved, where torch counts that copy as a
  change: the reports' torch versions did; torch 2.13 on the CPU did not (the buffers' version
  counter stayed put over two forwards under Gloo, and the run passed). An optimizer step, or
  the program's own in-place update, between a forward and its backward does the same to a
  bias or buffer.
- A leaf of more dimensions: a weight changed between its forward and backward, most often by an
  ``optimizer.step()`` that ran before a backward which still needed the old values (alternating
  updates of two models).

Each is a use of torch that autograd refuses: invalid-usage, with the remedy for what the line
shows.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class InPlaceChange(Cause):
    needs = frozenset({FactKind.IN_PLACE_CHANGE})
    specificity = 20
    supersedes = GENERIC | {"internal-error"}

    def __init__(self) -> None:
        self.first: Fact | None = None
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            if fact.kind is FactKind.IN_PLACE_CHANGE:
                self.first = self.first or fact
                self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if self.first is None:
            return None
        grad_fn, sizes = self.first.value, self.first.detail
        if grad_fn:
            text = _("Autograd found that a tensor it had saved for the backward pass, the "
                     "output of {grad_fn}, was changed in place before backward ran.",
                     grad_fn=grad_fn)
            fix = _("Make the operation that changes it out of place (inplace=False on the "
                    "activation, x = x + y instead of x += y, torch.where instead of an indexed "
                    "assignment); torch.autograd.set_detect_anomaly(True) prints the forward "
                    "line that made the tensor.")
        elif sizes.strip().isdigit():
            text = _("Autograd found that a tensor of one dimension ([{sizes}]) with no "
                     "grad_fn, a parameter or buffer, was changed in place between a forward "
                     "pass and its backward. That is the shape of a BatchNorm's running "
                     "statistics, and DistributedDataParallel (broadcast_buffers=True, its "
                     "default) copies rank 0's buffers into every rank's in place at the start "
                     "of each forward: on the torch versions where that copy counts as a "
                     "change, a second forward before the first one's backward breaks what the "
                     "first saved. An optimizer step, or the program's own in-place update, "
                     "between a forward and its backward does the same to a bias or buffer.",
                     sizes=sizes.strip())
            fix = _("Run one forward of the wrapped model per backward (one call on the real "
                    "and fake batches together), or wrap it with "
                    "DistributedDataParallel(model, broadcast_buffers=False) (torch 2.13 "
                    "on: forward_sync_buffers=False); call "
                    "optimizer.step() only after every backward that used the parameters.")
        else:
            text = _("Autograd found that a tensor of sizes [{sizes}] with no grad_fn, a "
                     "parameter or buffer, was changed in place between a forward pass and its "
                     "backward: most often an optimizer.step() that ran before a backward which "
                     "still needed the old weights (alternating updates of two models).",
                     sizes=sizes.strip())
            fix = _("Call backward for every loss that used the weights before "
                    "optimizer.step() changes them, or run the forward again after the step.")
        return made("invalid-usage", "error", text, fix, merge(self.bag.items))
