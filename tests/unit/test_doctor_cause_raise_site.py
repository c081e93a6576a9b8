"""causes/raise_site.py: where a Python exception was raised. Lines made from CPython's traceback
format (Lib/traceback.py: '  File "%s", line %d, in %s', the source line, from 3.11 a line of
carets; then "<type>: <message>") and the argument checks' messages of Python/ceval.c and
Objects/call.c ("%U() got an unexpected keyword argument '%S'", "%U() missing %zd required
positional argument: %U", "%U() takes %zd positional arguments but %zd were given", "%U() got
multiple values for argument '%S'"), with install folders of pip (site-packages), Debian
(dist-packages), conda and Windows, and a torch source tree."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

from ddpkit.doctor.log.causes.raise_site import in_stack
from ddpkit.doctor.log.facts.printed import frame_module

SCRIPT = ["Traceback (most recent call last):", '  File "train.py", line 40, in <module>',
          "    main()"]
CARETS = "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^"


def raised(path: str, line: str, *, carets: bool = False) -> list[str]:
    return [*SCRIPT, f'  File "{path}", line 212, in check',
            "    raise " + line.split(":", 1)[0] + "(", *([CARETS] if carets else []), line]


@pytest.mark.parametrize(("path", "module"), [
    ("/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/config.py",
     "deepspeed.runtime.config"),
    ("/usr/local/lib/python3.8/dist-packages/horovod/runner/launch.py", "horovod.runner.launch"),
    ("C:\\Users\\u\\miniconda3\\Lib\\site-packages\\torch\\distributed\\distributed_c10d.py",
     "torch.distributed.distributed_c10d"),
    ("/opt/pytorch/torch/nn/parallel/distributed.py", "torch.nn.parallel.distributed"),
    ("/home/u/venv/lib/python3.12/site-packages/mmengine/dist/utils.py", "mmengine.dist.utils"),
])
@pytest.mark.parametrize("kind", ["ValueError", "TypeError", "NotImplementedError"])
@pytest.mark.parametrize("carets", [False, True])
def test_a_stack_package_refusing_a_value_is_invalid_usage(tmp_path: Path, path: str, module: str,
                                                           kind: str, carets: bool) -> None:
    message = "tensor_parallel_size (3) must divide the number of attention heads (32)"
    found = top(tmp_path, raised(path, f"{kind}: {message}", carets=carets))
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert module in found.explanation and message in found.explanation
    assert module in found.fix
    assert found.evidence[0].text.startswith(kind)


@pytest.mark.parametrize("path", [
    "/usr/local/lib/python3.10/dist-packages/deepspeed/runtime/config.py",
    "/opt/conda/lib/python3.11/site-packages/megatron/training/arguments.py",
])
def test_an_assert_on_the_configuration_in_a_stack_package_is_invalid_usage(tmp_path: Path,
                                                                           path: str) -> None:
    message = ("Check batch related parameters. train_batch_size is not equal to "
               "micro_batch_per_gpu * gradient_acc_step * world_size 16 != 2 * 1 * 4")
    found = top(tmp_path, raised(path, f"AssertionError: {message}"))
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert message in found.explanation


@pytest.mark.parametrize("message", [
    "no_sync context manager is incompatible with gradient partitioning logic of ZeRO stage 3",
    "ZeRO-Offload is not compatible with pipeline parallelism",
    "activation checkpointing cannot be used with the fused Adam of this release",
    "bf16 is only supported with ZeRO stage 1 or 2 here",
])
def test_an_assert_that_two_settings_do_not_go_together_is_invalid_usage(tmp_path: Path,
                                                                          message: str) -> None:
    # asserted anywhere in a stack package (DeepSpeed's runtime/engine.py no_sync's assert): the
    # package refusing the combination it was given
    found = top(tmp_path, raised("/opt/conda/lib/python3.11/site-packages/deepspeed/runtime/"
                                 "engine.py", f"AssertionError: {message}"))
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert message in found.explanation


@pytest.mark.parametrize(("path", "message"), [
    # an assert of one parallel size against another, in a module that is no config reader
    # (Megatron-core's parallel_state.py, DeepSpeed's moe/layer.py): their options' own names
    ("/opt/conda/lib/python3.10/site-packages/megatron/core/parallel_state.py",
     "expert_model_parallel_size (3) must divide the data parallel size (8)"),
    ("/usr/local/lib/python3.8/dist-packages/deepspeed/moe/layer.py",
     "Number of experts (6) should be divisible by expert parallel world size (4)"),
    # torch Dynamo's check of an FSDP module it is asked to compile
    ("/x/site-packages/torch/_dynamo/variables/builder.py",
     "Dynamo can only compile an FSDP module wrapped with use_orig_params=True"),
])
def test_an_assert_naming_a_setting_of_the_distributed_run_is_invalid_usage(
        tmp_path: Path, path: str, message: str) -> None:
    found = top(tmp_path, raised(path, f"AssertionError: {message}"))
    assert (found.id, found.severity) == ("invalid-usage", "error"), path
    assert message in found.explanation


@pytest.mark.parametrize("path", [
    # torch v2.3.0 torch/multiprocessing/spawn.py, _wrap: fn(i, *args)
    "/opt/conda/lib/python3.7/site-packages/torch/multiprocessing/spawn.py",
    # torch v2.3.0 torch/distributed/elastic/multiprocessing/api.py, _wrap: ret = fn(*args_)
    "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/multiprocessing/api.py",
])
def test_a_script_function_called_with_the_scripts_own_arguments_is_no_version_mismatch(
        tmp_path: Path, path: str) -> None:
    # mp.spawn(main, args=(cfg)): not a tuple, so cfg's items became main's arguments
    found = top(tmp_path, raised(path, "TypeError: main() takes 2 positional arguments but 63 "
                                       "were given"))
    assert found.id != "version-mismatch"


@pytest.mark.parametrize("message", [
    "__init__() got an unexpected keyword argument 'dispatch_batches'",
    "initialize() missing 1 required positional argument: 'model'",
    "all_gather_into_tensor() takes 2 positional arguments but 3 were given",
    "forward() got multiple values for argument 'attention_mask'",
])
def test_installed_code_calling_with_arguments_the_callee_lacks_is_a_version_mismatch(
        tmp_path: Path, message: str) -> None:
    path = "/usr/local/lib/python3.10/dist-packages/transformers/trainer.py"
    found = top(tmp_path, raised(path, f"TypeError: {message}", carets=True))
    assert (found.id, found.severity) == ("version-mismatch", "error")
    assert "transformers.trainer" in found.explanation and message in found.explanation
    assert "pip check" in found.fix


@pytest.mark.parametrize("message", [
    "ValueError: FSDP with CPU offload cannot wrap this adapter",
    "ValueError: the batch size 64 is not divisible by world_size 3",
    "NotImplementedError: DeepSpeed ZeRO stage 3 does not support loading in 8 bits",
    "TypeError: a DistributedDataParallel module cannot be traced",
])
def test_any_package_refusing_a_setting_of_the_distributed_run_is_invalid_usage(
        tmp_path: Path, message: str) -> None:
    # a package outside the stack (a model hub's loader, a fine-tuning library) whose refusal
    # names the distributed run's own setting in its message
    for path in ("/x/site-packages/transformers/modeling_utils.py",
                 "/x/site-packages/peft/tuners/lora/model.py"):
        found = top(tmp_path, raised(path, message))
        assert (found.id, found.severity) == ("invalid-usage", "error"), (path, message)


@pytest.mark.parametrize("lines", [
    # raised in the user's own script: its own check, not a package's
    raised("train.py", "ValueError: tensor_parallel_size must divide the heads"),
    raised("train.py", "TypeError: __init__() got an unexpected keyword argument 'static_graph'"),
    # a package outside the distributed stack refusing its own input
    raised("/x/site-packages/transformers/tokenization_utils_base.py",
           "ValueError: Asking to pad but the tokenizer does not have a padding token."),
    # a capacity the run lacks, not a refused value
    raised("/x/site-packages/vllm/worker/worker.py",
           "ValueError: No available memory for the cache blocks. Try increasing "
           "`gpu_memory_utilization` when initializing the engine."),
    # an assert elsewhere in a package checks its own state, not what it was given
    raised("/x/site-packages/deepspeed/runtime/engine.py", "AssertionError: param not in list"),
    # another kind of exception
    raised("/x/site-packages/deepspeed/runtime/engine.py", "RuntimeError: something went wrong"),
    # the exception far below the frame: not the frame it was raised in
    [*raised("/x/site-packages/deepspeed/runtime/config.py", "x")[:-1],
     *(f"step {n}" for n in range(12)), "ValueError: a value"],
])
def test_other_raise_sites_are_not_read_as_a_refusal(tmp_path: Path, lines: list[str]) -> None:
    assert top(tmp_path, lines).id not in ("invalid-usage", "version-mismatch")


def test_each_process_has_its_own_innermost_frame(tmp_path: Path) -> None:
    """Two ranks' tracebacks interleaved line by line: rank 1's exception follows rank 0's frame
    in the log, but its own frame is the user's script."""
    lines = ["[rank0]: Traceback (most recent call last):",
             "[rank1]: Traceback (most recent call last):",
             '[rank1]:   File "train.py", line 9, in <module>',
             '[rank0]:   File "/x/site-packages/accelerate/state.py", line 5, in __init__',
             "[rank1]: ValueError: bad value in the script",
             "[rank0]: ValueError: Unsupported mixed precision mode"]
    found = top(tmp_path, lines)
    assert found.id == "invalid-usage"
    assert "accelerate.state" in found.explanation
    assert "Unsupported mixed precision mode" in found.explanation
    assert "bad value in the script" not in found.explanation


def test_a_more_specific_cause_of_the_same_line_ranks_first(tmp_path: Path) -> None:
    """torch's env:// rendezvous raises ValueError for a variable not set: the unset variable is
    the cause (rendezvous-config), not a refused value."""
    path = "/x/site-packages/torch/distributed/rendezvous.py"
    found = top(tmp_path, raised(path, "ValueError: Error initializing torch.distributed using "
                                       "env:// rendezvous: environment variable RANK expected, "
                                       "but not set"))
    assert found.id == "rendezvous-config"


@pytest.mark.parametrize(("module", "stack"), [
    ("torch.distributed.run", True), ("torch.cuda", True), ("lightning_fabric.strategies.ddp",
                                                            True),
    ("fairseq.distributed.utils", True), ("torch.nn.modules.linear", False),
    ("transformers.trainer", False), ("distributed", False), ("vllmx.config", False),
])
def test_the_stack(module: str, stack: bool) -> None:
    assert in_stack(module) is stack


def test_frame_module() -> None:
    assert frame_module("train.py") == ("train", False)
    assert frame_module("/work/proj/tools/train.py") == ("train", False)
    assert frame_module("/a/site-packages/torch/__init__.py") == ("torch.__init__", True)


@pytest.mark.parametrize(("path", "line"), [
    # torch v2.3.0 elastic/rendezvous/utils.py, parse_rendezvous_endpoint
    ("/opt/conda/lib/python3.10/site-packages/torch/distributed/elastic/rendezvous/utils.py",
     "ValueError: The port number of the rendezvous endpoint 'node1:abc' must be an integer "
     "between 0 and 65536."),
    ("/usr/local/lib/python3.8/dist-packages/torch/distributed/elastic/rendezvous/utils.py",
     "ValueError: The hostname of the rendezvous endpoint ':29500' must be a dot-separated list "
     "of labels, an IPv4 address, or an IPv6 address."),
    # elastic/rendezvous/api.py, RendezvousHandlerRegistry.create_handler
    ("/opt/conda/lib/python3.10/site-packages/torch/distributed/elastic/rendezvous/api.py",
     "ValueError: The rendezvous backend 'etcd2' is not registered. Did you forget to call "
     "`register`?"),
    # distributed/rendezvous.py, _tcp_rendezvous_handler / _rendezvous_helper
    ("/opt/conda/lib/python3.10/site-packages/torch/distributed/rendezvous.py",
     "ValueError: port number missing"),
])
def test_a_rendezvous_setting_refused_is_rendezvous_config(tmp_path: Path, path: str,
                                                           line: str) -> None:
    found = top(tmp_path, raised(path, line))
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert any(line in e.text for e in found.evidence)  # (a catalogued one in the catalogue's words)


@pytest.mark.parametrize("lines", [
    # DeepSpeed's engine (runtime/engine.py) refusing a configuration with ZeRORuntimeException
    # (runtime/zero/utils.py), posted with its traceback or as its last line alone
    ["deepspeed.runtime.zero.utils.ZeRORuntimeException: You are using ZeRO-Offload with a "
     "client provided optimizer (<class 'torch.optim.adamw.AdamW'>)"],
    raised("/x/site-packages/deepspeed/runtime/engine.py",
           "deepspeed.runtime.zero.utils.ZeRORuntimeException: The checkpoint being loaded used "
           "a DP world size of 4 but the current world size is 8."),
])
def test_a_class_a_stack_package_raises_only_to_refuse_is_invalid_usage(
        tmp_path: Path, lines: list[str]) -> None:
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert found.explanation.startswith("deepspeed refused what it was given")


@pytest.mark.parametrize("lines", [
    # Lightning's MisconfigurationException ("Exception used to inform users of misuse with
    # Lightning", lightning/fabric/utilities/exceptions.py; pytorch_lightning.utilities.exceptions
    # before 2.0): its accelerator connector's check of an interactive session
    # (trainer/connectors/accelerator_connector.py: "`Trainer(strategy={strategy!r})` is not
    # compatible with an interactive environment. Run your code as a script, or choose one of the
    # compatible strategies: ..."), posted alone or with its traceback
    ["MisconfigurationException: `Trainer(strategy='ddp')` is not compatible with an interactive "
     "environment. Run your code as a script, or choose one of the compatible strategies: "
     "`Fabric(strategy=None|'dp'|'ddp_notebook')`."],
    raised("/x/site-packages/pytorch_lightning/trainer/connectors/accelerator_connector.py",
           "pytorch_lightning.utilities.exceptions.MisconfigurationException: `Trainer("
           "strategy='ddp_spawn')` is not compatible with an interactive environment."),
    raised("/x/site-packages/lightning/pytorch/trainer/configuration_validator.py",
           "lightning.fabric.utilities.exceptions.MisconfigurationException: No `training_step()` "
           "method defined."),
])
def test_lightnings_misuse_exception_is_invalid_usage(tmp_path: Path, lines: list[str]) -> None:
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert found.explanation.startswith("lightning refused what it was given")


@pytest.mark.parametrize("line", [
    # the last line of a traceback a thread kept: a refusal (Python's ValueError, TypeError,
    # NotImplementedError) naming the distributed run's settings, its raiser unnamed
    "ValueError: You set `strategy=<DDPStrategy object at 0x7f00>` but strategies from the DDP "
    "family are not supported on the MPS accelerator.",
    "[rank3]: ValueError: world_size (6) must be divisible by the number of experts (4)",
    "TypeError: FullyShardedDataParallel got an auto_wrap_policy of the wrong type",
    "NotImplementedError: DeepSpeed ZeRO-3 does not support this model's tied embeddings",
    # an assert, posted alone, whose message names the run's setting it checked
    "[rank1]: AssertionError: sequence_parallel_size 3 does not divide world_size 8",
    "AssertionError: FSDP needs use_orig_params=True to be compiled",
    # an extension's native assertion raised into Python as a RuntimeError, on the number of
    # ranks (DeepEP's EPException: "Failed: Assertion error %s:%d '%s'"; glibc's assert() text)
    "RuntimeError: Failed: Assertion error /src/ep/csrc/buffer.cpp:41 'num_ranks <= 8 or "
    "internode'",
    "RuntimeError: python: comm.cpp:12: void init(int): Assertion `nranks % 2 == 0' failed.",
])
def test_a_refusal_posted_without_its_traceback_is_invalid_usage(tmp_path: Path,
                                                                  line: str) -> None:
    found = top(tmp_path, [line])
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert "does not say which code raised it" in found.explanation


@pytest.mark.parametrize("line", [
    "ValueError: could not convert string to float: 'abc'",  # no setting of the distributed run
    "RuntimeError: world_size mismatch in the checkpoint",  # RuntimeError is no refusal type
    "ValueError: DDP bucket would need more memory than the GPU has",  # memory: other rules'
    "AssertionError: param not in list",  # an assert of the code's own state
    "AssertionError: Distributed call failed",  # names the stack, no setting of it
    "AssertionError: FSDP flat parameter ran out of memory",  # memory, though it names FSDP
    # a native assertion on the code's own state, and an assertion's words that are no
    # assertion's report
    "RuntimeError: Failed: Assertion error /src/ep/csrc/kernels.cu:88 'ptr != nullptr'",
    "RuntimeError: Assertion error while reading world_size from the config",
])
def test_other_lone_exceptions_are_not_a_refused_setting(tmp_path: Path, line: str) -> None:
    found = top(tmp_path, [line])
    assert "does not say which code raised it" not in found.explanation
