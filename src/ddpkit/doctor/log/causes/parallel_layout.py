"""The job started a number of processes the model's parallel layout does not fit.

Model-parallel frameworks split the processes into tensor-, pipeline- (and context-) parallel
groups and check the count first (the facts' ``PARALLEL_LAYOUT``): Megatron-LM's
``initialize_model_parallel`` (and its copies in Megatron-DeepSpeed, vLLM and NeMo) raises
"world_size (N) is not divisible by tensor_model_parallel_size (T) x pipeline_model_parallel_size
(P)"; TensorRT-LLM's ``WorldConfig::mpi`` asserts "mpiSize == tp * pp", later "MPI size N != TP
size T * PP size P": an engine built for T x P GPUs run with another number of MPI processes.
The launch and the model disagree on the world size: the catalogue's rank-assignment.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class ParallelLayout(Noting):
    needs = frozenset({FactKind.PARALLEL_LAYOUT})
    specificity = 20
    supersedes = GENERIC | {"internal-error", "invalid-usage"}

    def __init__(self) -> None:
        super().__init__()
        self.counts: tuple[str, str] | None = None  # (processes, the layout's product), first seen

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            if fact.kind is FactKind.PARALLEL_LAYOUT:
                if fact.value and self.counts is None:
                    self.counts = (fact.value, fact.detail)
                self.note(event, [])

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        if self.counts:
            text = _("The job started {processes} processes, and the model's parallel layout "
                     "(tensor x pipeline parallel size: {layout}) does not fit that number.",
                     processes=self.counts[0], layout=self.counts[1])
        else:
            text = _("The number of processes the job started does not fit the model's parallel "
                     "layout (tensor x pipeline parallel size): TensorRT-LLM needs exactly as "
                     "many MPI processes as the engine was built for.")
        fix = _("Start as many processes as the layout needs (nodes x processes per node: a "
                "multiple of tensor x pipeline parallel size; TensorRT-LLM: mpirun -n equal to "
                "the engine's world size), or set the parallel sizes to fit the GPUs you start.")
        return made("rank-assignment", "error", text, fix, merge(self.bag.items))
