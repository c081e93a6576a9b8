"""torch.distributed's checks of how a program uses DDP and its process groups.

torch refuses, in its own words (the facts' ``TORCH_CHECK``; torch/csrc/distributed/c10d/):

- reducer.cpp, ``Reducer::prepare_for_backward``: "Expected to have finished reduction in the
  prior iteration before starting a new one. This error indicates that your module has
  parameters that were not used in producing loss." DDP waits for a gradient of every
  parameter; some took no part in the loss, so the last iteration never finished.
  PyTorch Lightning's DDP strategy replaces it with "It looks like your LightningModule has
  parameters that were not used in producing the loss returned by training_step."
- reducer.cpp, ``Reducer::mark_variable_ready``: "Expected to mark a variable ready only once."
  A parameter's gradient arrived twice in one backward pass: a parameter used outside
  ``forward`` or shared by concurrent forward passes, or reentrant activation checkpointing
  (which runs a part of the model's backward twice) under ``find_unused_parameters=True``.
- torch/nn/parallel/distributed.py, DistributedDataParallel's constructor: "... device_ids and
  output_device arguments only work with single-device CUDA modules, but got device_ids ..." (a
  module left on the CPU), "DistributedDataParallel is not needed when a module doesn't have any
  parameter that requires a gradient."
- reducer.cpp, under ``static_graph=True``: "Your training graph has changed in this iteration,
  ... this is not compatible with static_graph set to True." The parameters that give gradients
  changed from one iteration to the next, which a static graph promises they do not.
- DeepSpeed's ZeRO stage 1 and 2 (deepspeed/runtime/zero/stage_1_and_2.py): "The parameter N has
  already been reduced. Gradient computed twice for this partition." The same refusal as
  ready-twice, for a ZeRO partition: reentrant activation checkpointing, or a parameter used by
  two forward passes before one backward.
- distributed_c10d.py, ``_check_default_pg``: "Default process group is not initialized" (torch
  1.x's assertion; 2.x: "Default process group has not been initialized, please make sure to
  call init_process_group."): a collective, SyncBatchNorm or a sampler asked for the group before
  any was made.
- ProcessGroupNCCL.cpp, ProcessGroupGloo.cpp, ProcessGroupMPI.cpp: "ProcessGroupNCCL does not
  support barrier" (torch 1.0), "... does not support recvAnysource", "ProcessGroupGloo does not
  support reduce_scatter": the backend has no such operation.
- ProcessGroup.hpp, ``getBackend``: "No backend type associated with device type cpu": a
  collective on a tensor of a device type the group has no backend for (a CPU tensor in an
  NCCL-only group).

- NVIDIA apex's amp (apex/amp/_initialize.py, check_models): "Incoming model is an instance of
  torch.nn.parallel.DistributedDataParallel. Parallel wrappers should only be applied to the
  model(s) AFTER the model(s) have been returned from amp.initialize." The wrapper came first.

Each is the program's use that torch does not accept: invalid-usage, with the check's own remedy.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _
from ddpkit.wording import lines, sentences


class DdpChecks(Noting):
    needs = frozenset({FactKind.TORCH_CHECK})
    specificity = 20
    supersedes = GENERIC | {"collective-timeout", "internal-error"}

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        self.note(event, [f.value for f in facts if f.kind is FactKind.TORCH_CHECK])

    def finding(self, context: Context) -> Finding | None:
        if not self.bag:
            return None
        texts, fixes = [], []
        if "static-graph-changed" in self.values:
            texts.append(_("DDP was told the training graph is static (static_graph=True), and "
                           "the parameters that give gradients changed from one iteration to "
                           "the next: one unused in an iteration was used in another, or the "
                           "reverse."))
            fixes.append(_("Drop static_graph=True (and the older model._set_static_graph() "
                           "call) for a model whose used parameters change between iterations, "
                           "with find_unused_parameters=True where some go unused; or make "
                           "every iteration use the same parameters."))
        elif "unused-parameters" in self.values:
            texts.append(_("DDP refused to start an iteration before the last one's gradients "
                           "were all reduced: some parameters took no part in the loss, so "
                           "DDP waited for gradients that never came."))
            fixes.append(_("Let DDP look for unused parameters: "
                           "DistributedDataParallel(model, find_unused_parameters=True) "
                           "(Hugging Face Trainer: ddp_find_unused_parameters=True; Lightning: "
                           "strategy=\"ddp_find_unused_parameters_true\"), or make every "
                           "parameter take part in the loss (freeze or remove the others)."))
        if "ready-twice" in self.values:
            texts.append(_("DDP saw a parameter's gradient twice in one backward pass: a "
                           "parameter used outside forward() or by concurrent forward passes, "
                           "or reentrant activation checkpointing together with "
                           "find_unused_parameters=True."))
            fixes.append(_("Use non-reentrant activation checkpointing "
                           "(torch.utils.checkpoint(..., use_reentrant=False); Hugging Face: "
                           "gradient_checkpointing_kwargs={\"use_reentrant\": False}), or "
                           "DistributedDataParallel(..., static_graph=True), or drop "
                           "find_unused_parameters=True where no parameter is unused."))
        if "reduced-twice" in self.values:
            texts.append(_("DeepSpeed's ZeRO (stage 1 or 2) saw a parameter's gradient twice in "
                           "one backward pass, which it does not support: reentrant activation "
                           "checkpointing, or a parameter used by two forward passes before one "
                           "backward (two towers sharing weights)."))
            fixes.append(_("Use non-reentrant activation checkpointing (Hugging Face: "
                           "gradient_checkpointing_kwargs={\"use_reentrant\": False}) or turn "
                           "gradient checkpointing off; run shared-weight towers in one forward "
                           "pass before backward."))
        if "ddp-module-device" in self.values:
            texts.append(_("DistributedDataParallel was given device_ids for a module that is "
                           "not on one GPU: the model was still on the CPU (or spread over "
                           "several GPUs) when it was wrapped."))
            fixes.append(_("Move the model to the rank's GPU before wrapping it: "
                           "model.cuda(local_rank), then DistributedDataParallel(model, "
                           "device_ids=[local_rank]); a model on several GPUs takes "
                           "device_ids=None."))
        if "ddp-no-grad" in self.values:
            texts.append(_("DistributedDataParallel was given a module with no parameter that "
                           "requires a gradient: there is nothing for it to synchronise."))
            fixes.append(_("Wrap only the part that trains (its parameters with "
                           "requires_grad=True), or leave a frozen model unwrapped."))
        if "no-process-group" in self.values:
            texts.append(_("A torch.distributed call needed the default process group, and none "
                           "had been initialized: the script was started without a launcher, or "
                           "called it before init_process_group (SyncBatchNorm, a barrier or a "
                           "DistributedSampler in a single-process run)."))
            fixes.append(_("Start the script with a launcher and call init_process_group first "
                           "(ddpkit launch --nproc-per-node <G> train.py, or torchrun); for a "
                           "single-GPU run, use BatchNorm instead of SyncBatchNorm and no "
                           "DistributedSampler."))
        if "backend-lacks-op" in self.values:
            texts.append(_("The process group's backend does not have the operation the program "
                           "called (an old torch's NCCL without barrier, Gloo without "
                           "reduce_scatter, a receive from any source on NCCL)."))
            fixes.append(_("Call an operation the backend has, use a backend that has it (a "
                           "Gloo group for CPU-side operations: new_group(backend=\"gloo\")), or "
                           "update torch: newer releases add operations to each backend."))
        if "no-backend-for-device" in self.values:
            texts.append(_("A collective was called on a tensor of a device type the process "
                           "group has no backend for (a CPU tensor in an NCCL group)."))
            fixes.append(_("Move the tensor to the rank's GPU before the collective "
                           "(tensor.cuda()), or create the group with a backend for both: "
                           "init_process_group(backend=\"cpu:gloo,cuda:nccl\")."))
        if "wrapped-before-amp" in self.values:
            texts.append(_("apex's amp.initialize was given a model already wrapped in "
                           "DistributedDataParallel (or DataParallel); amp casts the model and "
                           "must see it before any parallel wrapper."))
            fixes.append(_("Call model, optimizer = amp.initialize(model, optimizer, ...) first "
                           "and wrap the model it returns: DistributedDataParallel(model, ...); "
                           "or drop apex for torch's own torch.autocast and "
                           "torch.amp.GradScaler."))
        return made("invalid-usage", "error", sentences(texts), lines(fixes),
                    merge(self.bag.items))
