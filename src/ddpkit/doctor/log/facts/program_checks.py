"""Programs' own checks and reports, by the words that open them, and what each means: the
tables the fact extractor (statements.py, printed.py) reads a line's words with."""

from __future__ import annotations

# Open MPI's messages of its TCP transports (v4.0 to v5.0; the help texts of opal/mca/btl/tcp/
# help-mpi-btl-tcp.txt, BTL_ERROR of btl_tcp_endpoint.c, orte/mca/oob/tcp/oob_tcp_connection.c's
# out-of-band daemons): a line's words, and the help topic or message they come from. The btl's
# connect failure prints its "Message: connect() to %s:%d failed" on a line of its own
# (facts/extract.py reads that line too).
MPI_TCP_TOPICS: dict[str, str] = {
    "Open MPI failed to TCP connect to a peer": "client connect fail",
    "received unexpected process identifier": "unexpected process identifier",
    "accepted a TCP connection from what appears to be": "server accept cannot find guid",
    "inbound MPI TCP connection request from a peer": "dropped inbound connection",
    "unable to complete a TCP connection": "oob connect fail",
}

# torch.distributed's checks of a program's use of DDP and its groups, by the words that open
# them, and their key (causes/ddp_checks.py): torch/csrc/distributed/c10d/reducer.cpp (v1.8 to
# v2.x: Reducer::prepare_for_backward's "Expected to have finished reduction in the prior
# iteration before starting a new one.", Reducer::mark_variable_ready's "Expected to mark a
# variable ready only once."), ProcessGroup.hpp getBackend's "No backend type associated with
# device type " (torch 2.0 on)
TORCH_CHECKS: dict[str, str] = {
    # a backend without the operation asked of it (ProcessGroupNCCL.cpp, ProcessGroupGloo.cpp,
    # ProcessGroupMPI.cpp: "ProcessGroupNCCL does not support barrier" in torch 1.0, "...
    # does not support recvAnysource", "ProcessGroupGloo does not support reduce_scatter")
    "ProcessGroupNCCL does not support": "backend-lacks-op",
    "ProcessGroupGloo does not support": "backend-lacks-op",
    "ProcessGroupMPI does not support": "backend-lacks-op",
    # (the base class's default of each operation a backend may lack, with the backend's name,
    # getBackendName(): ProcessGroup.hpp's "ProcessGroup %s does not support %s" in torch 1.x,
    # Backend.hpp's "Backend %s does not support %s" from torch 2.0: "Backend gloo does not
    # support alltoall")
    **{f"{base} {name} does not support": "backend-lacks-op"
       for base in ("Backend", "ProcessGroup") for name in ("gloo", "nccl", "mpi", "ucc")},
    # a call that needs the default process group before any (distributed_c10d.py,
    # _check_default_pg: torch 1.x's assertion "Default process group is not initialized", torch
    # 2.x's "Default process group has not been initialized, please make sure to call
    # init_process_group.")
    "Default process group is not initialized": "no-process-group",
    "Default process group has not been initialized": "no-process-group",
    # DistributedDataParallel's constructor (torch/nn/parallel/distributed.py, v1.x to v2.x):
    # "DistributedDataParallel device_ids and output_device arguments only work with
    # single-device CUDA modules, but got device_ids ..." (later "... single-device/multiple-
    # device GPU modules or CPU modules ..."), "DistributedDataParallel is not needed when a
    # module doesn't have any parameter that requires a gradient."
    "device_ids and output_device arguments only work with": "ddp-module-device",
    "DistributedDataParallel is not needed when a module": "ddp-no-grad",
    "Expected to have finished reduction in the prior iteration": "unused-parameters",
    # PyTorch Lightning's DDP strategy replaces that message with its own (strategies/ddp.py,
    # on_exception: _augment_message on ".*Expected to have finished reduction in the prior
    # iteration.*", 2.x): "It looks like your LightningModule has parameters that were not used
    # in producing the loss returned by training_step. ..."
    "It looks like your LightningModule has parameters that were not used": "unused-parameters",
    # the reducer's list of the parameters that gave no gradient, which it adds to that message
    # (reducer.cpp: "Parameter indices which did not receive grad for rank %d: ..." and, under
    # TORCH_DISTRIBUTED_DEBUG=INFO or DETAIL, "Parameters which did not receive grad for rank
    # %d: <names>"), posted alone as often as with it
    "which did not receive grad for rank": "unused-parameters",
    "Expected to mark a variable ready only once": "ready-twice",
    # the reducer under static_graph=True (reducer.cpp, REDUCER_CHECK, torch 1.9 on): "Your
    # training graph has changed in this iteration, e.g., one parameter is unused in first
    # iteration, but then got used in the second iteration. this is not compatible with
    # static_graph set to True." (and the reverse, appended to "Expected to have finished
    # reduction ...": "This error indicates that your training graph has changed in this
    # iteration, e.g., one parameter is used in first iteration, but then got unused ...", its
    # static_graph words past the 300 characters of a line an event keeps); only a static graph's
    # messages say it
    "training graph has changed in this iteration": "static-graph-changed",
    # DeepSpeed ZeRO stage 1 and 2's gradient hook (deepspeed/runtime/zero/stage_1_and_2.py,
    # assert params_already_reduced[param_id] == False): "The parameter <name> has already been
    # reduced. Gradient computed twice for this partition. Multiple gradient reduction(s) are
    # currently not supported", the same refusal as DDP's ready-twice, for a ZeRO partition
    "Gradient computed twice for this partition": "reduced-twice",
    "No backend type associated with device type": "no-backend-for-device",
    # NVIDIA apex's amp (apex/amp/_initialize.py, check_models, 2018 to its deprecation): "Incoming
    # model is an instance of {torch.nn.parallel.DistributedDataParallel, apex.parallel.
    # DistributedDataParallel, torch.nn.parallel.DataParallel}. Parallel wrappers should only be
    # applied to the model(s) AFTER \nthe model(s) have been returned from amp.initialize." (earlier
    # "... should only be applied AFTER the model(s) have been returned ...")
    "Parallel wrappers should only be applied": "wrapped-before-amp",
}

# A process finding no GPU to use, in its program's words, and what each means (causes/no_gpu.py):
# torch/cuda/__init__.py _lazy_init (v1.x to v2.x): "Torch not compiled with CUDA enabled" (a
# CPU-only build), "Found no NVIDIA driver on your system" (no driver); c10/cuda/CUDAFunctions.cpp
# "No CUDA GPUs are available" (none visible: CUDA_VISIBLE_DEVICES, a container without them),
# "CUDA driver initialization failed, you might not have a CUDA gpu."; DeepSpeed's launcher
# (launcher/runner.py) "Unable to proceed, no GPU resources available"
NO_GPU_TEXTS: dict[str, str] = {
    "Torch not compiled with CUDA enabled": "cpu-build",
    "Found no NVIDIA driver on your system": "no-driver",
    "CUDA driver initialization failed": "no-driver",
    "No CUDA GPUs are available": "none-visible",
    # the same check in a ROCm build (hipify turns torch's "CUDA" into "HIP")
    "No HIP GPUs are available": "none-visible-rocm",
    "no GPU resources available": "none-visible",
    # Slurm's gres/gpu plugin (src/plugins/gres/common/gres_common.c): CUDA_VISIBLE_DEVICES is set
    # to "NoDevFiles" for a job step given the gres without device files (no File= in gres.conf),
    # which no CUDA program can parse as a device list
    "NoDevFiles": "slurm-no-device-files",
}
