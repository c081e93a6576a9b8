"""torch.compile's DDP optimizer failing: internal-error.

When a DistributedDataParallel module is compiled with ``torch._dynamo.config.optimize_ddp`` on
(its default), TorchDynamo (torch/_dynamo/convert_frame.py, eval_frame.py in v2.0) hands each
graph to DDPOptimizer (torch/_dynamo/backends/distributed.py), which splits it at DDP's bucket
boundaries, so that the gradients' all-reduces overlap the backward pass, and compiles each piece
with the backend the program chose. The backend Dynamo calls is then DDPOptimizer's
``compile_fn``, and an exception in it is wrapped as BackendCompilerFailed (torch/_dynamo/exc.py):
"backend='compile_fn' raised:" and the exception on the next line (v2.1 on), "compile_fn raised
<type>: ..." (v2.0). That is torch's own graph splitting failing on this model: not the launch,
nor a call the program made wrongly. The switch torch's config documents beside it
(``optimize_ddp = False``) turns the splitting off. Any other backend's failure (inductor's, a
program's own) is the compiler's, which no finding of this table names, and stays the rank's.
"""

from __future__ import annotations

from ddpkit.doctor.log.causes.base import InternalError
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

DDP_OPTIMIZER_BACKEND = "compile_fn"  # DDPOptimizer.compile_fn's __name__, as Dynamo prints it


class DdpOptimizer(InternalError):
    needs = frozenset({FactKind.COMPILER_FAILED})

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        if any(f.kind is FactKind.COMPILER_FAILED and f.value == DDP_OPTIMIZER_BACKEND
               for f in facts):
            self.note(event, [DDP_OPTIMIZER_BACKEND])

    def words(self) -> tuple[str, str]:
        text = _("torch.compile's DDP optimizer failed (backend 'compile_fn', torch/_dynamo/"
                 "backends/distributed.py): the pass that splits a compiled DDP model's graph "
                 "at its gradient buckets raised the exception on the next line. That is torch's "
                 "own compiler failing on this model, not the launch or the network.")
        fix = _("Turn the DDP graph splitting off before compiling: "
                "torch._dynamo.config.optimize_ddp = False (gradients are then all-reduced "
                "after the backward pass, with less overlap); or run a newer torch. If it still "
                "fails, report it to PyTorch with the traceback.")
        return text, fix
