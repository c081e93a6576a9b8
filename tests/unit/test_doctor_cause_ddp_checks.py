"""causes/ddp_checks.py and collective_mismatch.py: torch.distributed's checks of how a program
uses DDP and its groups are invalid-usage; ranks calling different collectives is
collective-timeout (the hang the debug wrapper prevented). Sources of the lines (torch v2.4.0,
torch/csrc/distributed/c10d/):

- PyTorch Lightning 2.4.0, src/lightning/pytorch/strategies/ddp.py, DDPStrategy.on_exception:
  _augment_message replaces the reducer's message below with "It looks like your LightningModule
  has parameters that were not used in producing the loss returned by training_step. If this is
  intentional, you must enable the detection of unused parameters in DDP, either by setting the
  string value `strategy='ddp_find_unused_parameters_true'` or ..."
- reducer.cpp, Reducer::prepare_for_backward: "Expected to have finished reduction in the prior
  iteration before starting a new one. This error indicates that your module has parameters that
  were not used in producing loss. You can enable unused parameter detection by passing the
  keyword argument `find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`,
  ..."; Reducer::mark_variable_ready: "Expected to mark a variable ready only once. This error
  is caused by one of the following reasons: 1) Use of a module parameter outside the `forward`
  function. ..."
- reducer.cpp (v1.9 on), Reducer::autograd_hook under static_graph: REDUCER_CHECK "Your training
  graph has changed in this iteration, ", "e.g., one parameter is unused in first iteration, but
  ", "then got used in the second iteration. this is not ", "compatible with static_graph set to
  True."; prepare_for_backward's unused-parameters message with the reverse case for a static
  graph ("... one parameter is used in first iteration, but then got unused in the second
  iteration. this is not compatible with static_graph set to True.")
- DeepSpeed v0.18, deepspeed/runtime/zero/stage_1_and_2.py, reduce_independent_p_g_buckets_and_
  remove_grads: ``assert self.params_already_reduced[param_id] == False, f"The parameter
  {debug_param2name(param)} has already been reduced.`` (a backslash continues the f-string, with
  the source's indentation inside it) "Gradient computed twice for this partition. Multiple gradient
  reductions are currently not supported"
- ProcessGroupNCCL.cpp (torch v1.0.0), ProcessGroupNCCL::barrier: ``throw
  std::runtime_error("ProcessGroupNCCL does not support barrier")``; v2.4.0's "ProcessGroupNCCL
  does not support recvAnysource", ProcessGroupGloo.cpp's "ProcessGroupGloo does not support
  reduce_scatter"
- Backend.hpp (torch v2.0 on), each operation's default in the base class: ``TORCH_CHECK(false,
  c10::str("Backend ", getBackendName(), " does not support alltoall"))``; torch 1.x's
  ProcessGroup.hpp the same with "ProcessGroup "
- torch v1.8.0 torch/nn/parallel/distributed.py, DistributedDataParallel.__init__: ``"device_ids
  and output_device arguments only work with single-device CUDA modules, but got device_ids {},
  output_device {}, and module parameters {}."``, "DistributedDataParallel is not needed when a
  module doesn't have any parameter that requires a gradient."
- distributed_c10d.py (torch v1.8.0), _check_default_pg: ``assert _default_pg is not None,
  "Default process group is not initialized"``
- ProcessGroup.hpp, getBackend: ``TORCH_CHECK(false, "No backend type associated with device
  type ", deviceType)``
- ProcessGroupWrapper.cpp, CollectiveFingerPrint::verify: "Detected mismatch between collectives
  on ranks. Rank " << rank << " is running collective: " << fingerprint << ", but Rank " << r <<
  " is running collective: " << other << "."; a fingerprint prints "CollectiveFingerPrint(
  SequenceNumber=N, OpType=ALLREDUCE, TensorShape=[...], ...)"
- NVIDIA apex, apex/amp/_initialize.py, check_models: ``raise RuntimeError("Incoming model is an
  instance of {}. ".format(parallel_type) + "Parallel wrappers should only be applied to the
  model(s) AFTER \n" + "the model(s) have been returned from amp.initialize.")`` (its line break
  inside; older releases "... should only be applied AFTER the model(s) have been returned from
  amp.initialize.")
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

UNUSED = ("Expected to have finished reduction in the prior iteration before starting a new "
          "one. This error indicates that your module has parameters that were not used in "
          "producing loss. You can enable unused parameter detection by passing the keyword "
          "argument `find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`")
LIGHTNING_UNUSED = ("It looks like your LightningModule has parameters that were not used in "
                    "producing the loss returned by training_step. If this is intentional, you "
                    "must enable the detection of unused parameters in DDP, either by setting the "
                    "string value `strategy='ddp_find_unused_parameters_true'`")
TWICE = ("Expected to mark a variable ready only once. This error is caused by one of the "
         "following reasons: 1) Use of a module parameter outside the `forward` function.")
STATIC_USED = ("Your training graph has changed in this iteration, e.g., one parameter is unused "
               "in first iteration, but then got used in the second iteration. this is not "
               "compatible with static_graph set to True.")
STATIC_UNUSED = ("Expected to have finished reduction in the prior iteration before starting a "
                 "new one. This error indicates that your training graph has changed in this "
                 "iteration, e.g., one parameter is used in first iteration, but then got unused "
                 "in the second iteration. this is not compatible with static_graph set to True.")
ZERO_TWICE = ("The parameter {name} has already been reduced.             Gradient computed twice "
              "for this partition.             Multiple gradient {reductions} currently not "
              "supported")
NO_BACKEND = "No backend type associated with device type {device}"
APEX = ("Incoming model is an instance of {wrapper}. Parallel wrappers should only be applied to "
        "the model(s) AFTER ")
FINGERPRINT = ("CollectiveFingerPrint(SequenceNumber={seq}, OpType={op}, TensorShape=[{shape}], "
               "TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), "
               "device=cuda))")
MISMATCH = ("Detected mismatch between collectives on ranks. Rank {rank} is running collective: "
            "{mine}, but Rank {other} is running collective: {theirs}.")
TRACE = ["Traceback (most recent call last):", '  File "train.py", line 88, in <module>',
         "    loss.backward()"]


@pytest.mark.parametrize(("message", "fix_word"), [
    (UNUSED, "find_unused_parameters=True"), (TWICE, "use_reentrant"),
    (LIGHTNING_UNUSED, "ddp_find_unused_parameters_true"),
    (NO_BACKEND.format(device="cpu"), "cpu:gloo,cuda:nccl"),
    # (torch 1.0's: the catalogue reads torch from 1.8, whose own templates it names)
    ("ProcessGroupNCCL does not support barrier", "update torch"),
    ("Default process group is not initialized", "SyncBatchNorm"),
    (STATIC_USED, "static_graph=True"), (STATIC_UNUSED, "static_graph=True"),
    (ZERO_TWICE.format(name="388", reductions="reduction is"), "use_reentrant"),
    (ZERO_TWICE.format(name="encoder.layer.0.attention.self.query.weight",
                       reductions="reductions are"), "use_reentrant"),
    ("DistributedDataParallel device_ids and output_device arguments only work with "
     "single-device CUDA modules, but got device_ids [1], output_device 1, and module "
     "parameters {device(type='cpu')}.", "model.cuda(local_rank)"),
    ("DistributedDataParallel is not needed when a module doesn't have any parameter that "
     "requires a gradient.", "requires_grad=True"),
    # apex's amp (its two wordings; the wrapper's type as check_models names it)
    (APEX.format(wrapper="torch.nn.parallel.DistributedDataParallel"), "amp.initialize"),
    (APEX.format(wrapper="torch.nn.parallel.DataParallel"), "amp.initialize"),
    ("Incoming model is an instance of apex.parallel.DistributedDataParallel. Parallel wrappers "
     "should only be applied AFTER the model(s) have been returned from amp.initialize.",
     "amp.initialize")])
@pytest.mark.parametrize("head", ["RuntimeError: ", "[rank1]: RuntimeError: "])
def test_a_check_on_the_programs_use_is_invalid_usage(tmp_path: Path, message: str,
                                                      fix_word: str, head: str) -> None:
    found = top(tmp_path, [*TRACE, head + message])
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert fix_word in found.fix


@pytest.mark.parametrize("base", ["Backend", "ProcessGroup"])
@pytest.mark.parametrize(("backend", "operation"), [
    ("gloo", "alltoall"), ("gloo", "alltoall_base"), ("nccl", "monitoredBarrier"),
    ("mpi", "allreduce_sparse"), ("ucc", "reduce_scatter_tensor_coalesced")])
def test_an_operation_the_backend_lacks_is_invalid_usage(tmp_path: Path, base: str, backend: str,
                                                         operation: str) -> None:
    # (raised through the collective's wrapper, whose frame the traceback ends on)
    lines = [*TRACE[:2], '  File "/usr/lib/python3/dist-packages/torch/distributed/'
             'distributed_c10d.py", line 4114, in all_to_all',
             "    work = group.alltoall(output_tensor_list, input_tensor_list, opts)",
             f"[rank0]: RuntimeError: {base} {backend} does not support {operation}"]
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert "backend does not have the operation" in found.explanation


@pytest.mark.parametrize("message", [UNUSED, TWICE])
def test_the_reducers_message_alone_is_read(tmp_path: Path, message: str) -> None:
    # (posted without "RuntimeError:": its own "This error ..." sentence is what the scan sees)
    found = top(tmp_path, [message])
    assert (found.id, found.severity) == ("invalid-usage", "error")


@pytest.mark.parametrize("line", [
    "Parameter indices which did not receive grad for rank 3: 149 150 151 152",
    "[rank14]: Parameters which did not receive grad for rank 14: final_res_block.time_mlp.1.bias, "
    "norm_mid_cond.weight",
    "DistributedDataParallel device_ids and output_device arguments only work with single-device "
    "CUDA modules, but got device_ids [1], output_device 1, and module parameters "
    "{device(type='cpu')}."])
def test_a_ddp_check_posted_without_its_exception_is_read(tmp_path: Path, line: str) -> None:
    # (no error word on the line: read where a run ends, the log's last 2 MiB)
    found = top(tmp_path, ["epoch 0 step 10 loss 2.31", line])
    assert (found.id, found.severity) == ("invalid-usage", "error")


@pytest.mark.parametrize(("mine", "theirs"), [("ALLREDUCE", "BROADCAST"),
                                              ("_ALLGATHER_BASE", "ALLREDUCE")])
def test_ranks_calling_different_collectives_is_the_mismatch(tmp_path: Path, mine: str,
                                                             theirs: str) -> None:
    line = "RuntimeError: " + MISMATCH.format(
        rank=0, other=1, mine=FINGERPRINT.format(seq=12, op=mine, shape=4),
        theirs=FINGERPRINT.format(seq=12, op=theirs, shape=1853171))
    found = top(tmp_path, [*TRACE, line])
    assert (found.id, found.severity) == ("collective-timeout", "error")
    assert mine in found.explanation  # (the line is clipped for its evidence: its first call)
    assert "same order" in found.fix


def test_the_mismatch_raised_inside_torch_distributed_is_still_the_mismatch(tmp_path: Path
                                                                             ) -> None:
    # as torch 2.13 raises it: from the wrapper's collective, called in distributed_c10d.py (the
    # raise site reads as torch refusing a call's arguments, which the mismatch explains; the
    # real run is tests/fixtures/logs/torchrun-cpu/mismatch)
    line = "[rank1]: RuntimeError: " + MISMATCH.format(
        rank=1, other=0, mine=FINGERPRINT.format(seq=0, op="BROADCAST", shape=4),
        theirs=FINGERPRINT.format(seq=0, op="ALLREDUCE", shape=4))
    found = top(tmp_path, [
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "/opt/venv/lib/python3.11/site-packages/torch/distributed/'
        'distributed_c10d.py", line 2856, in broadcast', "[rank1]:     work.wait()", line])
    assert (found.id, found.severity) == ("collective-timeout", "error")
    assert "BROADCAST" in found.explanation


def test_an_other_expected_is_not_a_ddp_check(tmp_path: Path) -> None:
    found = top(tmp_path, [*TRACE, "RuntimeError: Expected all tensors to be on the same device, "
                                   "but found at least two devices, cuda:0 and cpu!"])
    assert "DDP" not in found.explanation


def test_a_static_graph_that_changed_is_not_called_unused_parameters(tmp_path: Path) -> None:
    # the reducer's unused-parameters message for a static graph: the cause is the promise of
    # a static graph, not a missing find_unused_parameters=True
    found = top(tmp_path, [*TRACE, "RuntimeError: " + STATIC_UNUSED])
    assert "static_graph=True" in found.explanation
    assert "took no part in the loss" not in found.explanation
