"""A program's own assertion that torch sees its GPUs, failing: torch sees fewer than it was asked
for, or none.

CPython prints a traceback's innermost frame, then its source line, then (from 3.11) carets under
the failing expression, then the exception (Lib/traceback.py). An ``AssertionError`` right after
a source line such as ``assert num_gpu <= torch.cuda.device_count()`` (YOLOX's tools/train.py and
its many forks) or ``assert torch.cuda.is_available()`` is the program refusing to start with the
GPUs torch reports: a CPU-only torch build, no loaded NVIDIA driver, CUDA_VISIBLE_DEVICES (a
scheduler's or a container's) hiding them, or a run that asked for more GPUs than the machine
has. torch.cuda.device_count() and is_available() report what the CUDA runtime sees, so the
lines alone cannot say which: the finding names each, and the one command that tells them apart.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

# lines between the source line and the exception: the carets of Python 3.11 on, a blank
NEAR = 3


class GpuAssert(Cause):
    kinds = frozenset({"exception", "job-fact"})  # (the source line is a job-fact's)
    specificity = 20
    supersedes = GENERIC

    def __init__(self) -> None:
        self.pending: tuple[Event, Fact] | None = None  # the last assert line read
        self.failed: Fact | None = None
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            if fact.kind is FactKind.GPU_ASSERT:
                self.pending = (event, fact)
        if (event.kind == "exception" and event.get("type") == "AssertionError"
                and self.pending is not None and self.failed is None):
            line, fact = self.pending
            if line.file == event.file and 0 < event.line - line.line <= NEAR:
                self.failed = fact
                self.bag.add(line)
                self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if self.failed is None:
            return None
        text = _("The program asserted that torch sees the GPUs it needs ({source}), and the "
                 "assertion failed: torch saw fewer GPUs than the run asked for, or none. A "
                 "CPU-only torch build, no loaded NVIDIA driver, or CUDA_VISIBLE_DEVICES (set by a "
                 "scheduler or a container) hiding them all look like this, as does asking for "
                 "more GPUs than the machine has.", source=self.failed.detail)
        fix = _("On that node, run: python -c \"import torch; print(torch.__version__, "
                "torch.version.cuda, torch.cuda.is_available(), torch.cuda.device_count())\" "
                "and nvidia-smi. A version ending in +cpu (or torch.version.cuda None) needs a "
                "CUDA build of torch; a count below nvidia-smi's needs CUDA_VISIBLE_DEVICES "
                "widened or unset; otherwise ask for no more GPUs than the count.")
        return made("cuda-error", "error", text, fix, merge(self.bag.items))
