"""Where a Python exception was raised: a package of the distributed stack refusing a value is
invalid-usage; installed code calling other installed code with arguments it does not take is
version-mismatch.

CPython prints a traceback's frames innermost last (``  File "%U", line %d, in %U``, then the
source line, from 3.11 carets under the failing expression; Lib/traceback.py), then the exception
as ``<type>: <message>``: the frame printed last before the exception's line is where it was
raised. Python's documentation of the builtin exceptions gives their meaning: ValueError, "an
operation or function receives an argument that has the right type but an inappropriate value";
TypeError, an operation or function "applied to an object of inappropriate type";
NotImplementedError, what is not (yet) supported; and an AssertionError where a module that reads
a package's configuration or launch arguments asserts on them (``CONFIG_MODULES``), where any
module asserts that two things are incompatible (``INCOMPATIBLE``), or where the assert's message
names a setting of the distributed run (``STACK_WORDS`` below: a check of the run's own setting,
such as Megatron's and DeepSpeed's asserts that one parallel size divides another, torch
Dynamo's that FSDP be wrapped with use_orig_params=True, or an extension's native assertion on the
number of ranks, ``NATIVE_ASSERT``). Raised in a module of the distributed stack (``STACK``:
torch's distributed, parallel, CUDA and multiprocessing modules, the launchers and trainers that
drive them, and any installed package's own ``distributed`` or ``dist`` module), they are that
package refusing what the run's settings or the script gave it: a launcher flag, a config value,
an argument of a call. So is a refusal raised in any installed package whose message names the
distributed run's own setting (``STACK_WORDS``: DeepSpeed, ZeRO, FSDP, DDP, the world size, the
number of ranks, the local rank...). So is such a refusal posted alone,
with no frame before it (the last line of a traceback a thread kept; an AssertionError too, as its
message names the run's setting), its raiser unnamed, unless
the message catalogue knows the line (its source says what it is: DDP's "This indicates a bug in
DDP" is internal-error). Every rerun fails the same way until it is changed. Raised where the
rendezvous settings are read (torchelastic's rendezvous package, init_process_group's URL
handlers: "The port number of the rendezvous endpoint ... must be an integer", "Unknown rendezvous
backend"), the value refused is a rendezvous setting: rendezvous-config.

A call's arguments that do not fit the function's signature are refused in the caller's frame
(CPython's ``%U() got an unexpected keyword argument '%S'``, ``%U() missing %zd required
positional argument(s)``, ``%U() takes %zd positional arguments but %zd were given``, ``got
multiple values for argument``; Python/ceval.c, Objects/call.c): raised in an installed package,
that package calls another one's function as another release of it had it, so the two installed
releases do not fit together.

A message about memory is a capacity the run lacks, not a refused value (left to the rules that
read memory). Any other rule's error says more, and this cause ranks at its id's own priority.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.messages import catalogue
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

REFUSALS = frozenset({"ValueError", "TypeError", "NotImplementedError"})
# Exception classes a stack package raises only to refuse a configuration, read with or without
# their traceback: DeepSpeed's ZeRORuntimeException (runtime/zero/utils.py), which its engine
# raises for a client optimizer ZeRO-Offload refuses and for a checkpoint saved at another
# data-parallel world size (runtime/engine.py); Lightning's MisconfigurationException ("Exception
# used to inform users of misuse with Lightning", lightning/fabric/utilities/exceptions.py, and
# pytorch_lightning.utilities.exceptions before 2.0), which its trainer, accelerator connector and
# strategies raise for a setting they refuse ("`Trainer(strategy='ddp')` is not compatible with an
# interactive environment")
REFUSAL_TYPES = {"ZeRORuntimeException": "deepspeed", "MisconfigurationException": "lightning"}
# Modules that read a package's configuration or its launch arguments (the last part of their
# name): there an assert statement checks what the user configured (DeepSpeed's runtime/config.py
# "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu *
# gradient_acc_step * world_size", Megatron's arguments.py), so its AssertionError is a refusal
CONFIG_MODULES = frozenset({"config", "configuration", "arguments", "args", "launch", "launcher",
                            "run", "runner"})
# Modules of the distributed stack, by the start of their dotted name
STACK = ("torch.distributed", "torch.nn.parallel", "torch.cuda", "torch.multiprocessing",
         "torch.utils.data.distributed", "accelerate", "deepspeed", "horovod", "lightning",
         "lightning_fabric", "pytorch_lightning", "megatron", "colossalai", "fairscale",
         "apex.parallel", "torchx", "torchrun", "vllm", "sglang", "lmdeploy", "tensorrt_llm",
         "ray.train", "ray.util.collective")
# Modules that read the rendezvous settings (torchelastic's rendezvous package, init_process_group's
# URL handlers): a value they refuse is a rendezvous setting, rendezvous-config
RENDEZVOUS = ("torch.distributed.elastic.rendezvous", "torch.distributed.rendezvous")
UNKNOWN_SITE = ""  # (the module of a refusal posted without its traceback)
_OWN_DISTRIBUTED = frozenset({"distributed", "dist"})  # a package's own module of that name
# An assert whose message says two things do not go together is a package refusing a
# combination it was given, wherever the assert sits (DeepSpeed's engine.py no_sync: "no_sync
# context manager is incompatible with gradient partitioning logic of ZeRO stage 3"), not a
# check of its own state failing
INCOMPATIBLE = re.compile(r"\b(?:incompatible with|not compatible with|cannot be used (?:with|"
                          r"together)|not supported (?:with|when|for|in combination)|is only "
                          r"supported (?:with|when|for))\b", re.IGNORECASE)
# installed code whose call of a function is the script's own: the function and the arguments
# the script handed it (torch.multiprocessing's spawn, whose _wrap calls fn(i, *args), and
# torchelastic's _wrap for a function entrypoint, ret = fn(*args)); a signature refused there is
# the script's call, not two installed packages that do not fit
USER_CALLERS = frozenset({"torch.multiprocessing.spawn",
                          "torch.distributed.elastic.multiprocessing.api"})
# CPython's messages for a call whose arguments do not fit the callee's signature
SIGNATURE = re.compile(r"\bgot an unexpected keyword argument\b|\bmissing \d+ required "
                       r"(?:positional|keyword-only) arguments?\b|\btakes (?:from \d+ to )?\d+ "
                       r"positional arguments? but \d+ (?:were|was) given\b"
                       r"|\bgot multiple values for (?:keyword )?argument\b")
# Words by which a refusal's message names the distributed stack, whichever package raised it
# (transformers' from_pretrained: "DeepSpeed Zero-3 is not compatible with `low_cpu_mem_usage=True`
# or with passing a `device_map`."): the value refused is a setting of the distributed run. The
# parallel sizes are named as the packages' options spell them: Megatron's
# --tensor-model-parallel-size (tensor_model_parallel_size), vLLM's tensor_parallel_size and
# pipeline_parallel_size, DeepSpeed's expert_parallel_size and sequence_parallel_size
STACK_WORDS = re.compile(r"\b(?:DeepSpeed|ZeRO|Zero-?[123]|FSDP|FullyShardedDataParallel"
                         r"|DistributedDataParallel|DDP|NCCL|Gloo|torchrun|torch\.distributed"
                         r"|process group|world[ _]size|local[ _]rank|(?:num_?|n)ranks|distributed)\b"
                         r"|\b[a-z_]*parallel[ _-]?(?:world[ _-]?)?size\b", re.IGNORECASE)
# A native (C or C++) assertion of a package's extension, raised into Python as a RuntimeError:
# DeepEP's EP_HOST_ASSERT (csrc/kernels/exception.cuh: EPException's "Failed: Assertion error
# %s:%d '%s'", the file, the line and the condition), glibc's assert() text where a library passes
# it on (assert/assert.c: "Assertion `%s' failed."). It is read as an AssertionError is.
NATIVE_ASSERT = re.compile(r"\bFailed: Assertion error \S{1,400}:\d{1,7} '"
                           r"|\bAssertion `[^`'\n]{1,400}' failed")
# STACK_WORDS that name the stack and no setting of it: an assert saying only "Distributed call
# failed" checks the code's own state, not a value the run was given
_STACK_ONLY = frozenset({"distributed", "torch.distributed"})
_FRAME_REACH = 8  # lines from the innermost frame to the exception (source, carets, a long raise)
_ORIGINS = 256  # tracebacks followed at once (one per process of a log)


def names_setting(message: str) -> bool:
    """Whether an assert's ``message`` names a setting of the distributed run (a STACK_WORDS
    word other than the stack's own name)."""
    return any(m.group(0).lower() not in _STACK_ONLY for m in STACK_WORDS.finditer(message))


def asserts(kind: str, message: str) -> bool:
    """Whether the exception (its type's last name, its message) is an assertion that failed."""
    return kind == "AssertionError" or bool(NATIVE_ASSERT.search(message))


def in_stack(module: str) -> bool:
    """Whether the dotted module belongs to the distributed stack."""
    parts = module.split(".")
    return (any(module == top or module.startswith(top + ".") for top in STACK)
            or bool(_OWN_DISTRIBUTED & set(parts[1:])))


@dataclass(frozen=True)
class Raised:
    """An exception and the frame printed last before it: where it was raised."""

    module: str  # the frame's module, dotted
    installed: bool  # the frame's file is an installed package's (or torch's own tree)
    kind: str  # the exception's type as printed
    message: str


class RaiseSites:
    """Each process's innermost frame, followed to the exception its traceback ends with (the
    facts' ``FRAME`` and ``EXCEPTION``, one traceback per file, origin and rank)."""

    def __init__(self) -> None:
        # the last frame of each process's traceback: (its line, module, installed)
        self.frames: dict[tuple[str, str, int | None], tuple[int, str, bool]] = {}

    def read(self, event: Event, facts: tuple[Fact, ...]) -> list[Raised]:
        """The exceptions ``event`` ends a traceback with, each with where it was raised."""
        where = (event.file, event.origin, event.rank)
        found: list[Raised] = []
        for fact in facts:
            if fact.kind is FactKind.FRAME and (where in self.frames
                                                or len(self.frames) < _ORIGINS):
                self.frames[where] = (event.line, fact.value, fact.detail == "installed")
            elif fact.kind is FactKind.EXCEPTION:
                frame = self.frames.pop(where, None)
                if frame is not None and 0 < event.line - frame[0] <= _FRAME_REACH:
                    found.append(Raised(frame[1], frame[2], fact.value, fact.detail))
        return found


class RaiseSite(Cause):
    needs = frozenset({FactKind.FRAME, FactKind.EXCEPTION})
    specificity = 0
    supersedes = GENERIC

    def __init__(self) -> None:
        self.sites = RaiseSites()
        self.refused: tuple[str, str, str] | None = None  # (module, type, message)
        self.mismatch: tuple[str, str] | None = None  # (module, message)
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        sites = self.sites.read(event, facts)
        for raised in sites:
            self._read(event, raised.module, raised.installed, raised.kind, raised.message)
        if not sites and self.refused is None:  # an exception with no frame before it
            for fact in facts:
                name = fact.value.rsplit(".", 1)[-1]
                if (fact.kind is FactKind.EXCEPTION
                        and (name in REFUSALS and STACK_WORDS.search(fact.detail)
                             or asserts(name, fact.detail) and names_setting(fact.detail))
                        and "memory" not in fact.detail.lower()
                        and catalogue().match(event.text) is None):  # (its source says more)
                    self.refused = (UNKNOWN_SITE, fact.value, fact.detail)
                    self.bag.add(event)
                    break
        for fact in facts:
            name = fact.value.rpartition(".")[2]
            if (fact.kind is FactKind.EXCEPTION and name in REFUSAL_TYPES
                    and self.refused is None):
                self.refused = (REFUSAL_TYPES[name], fact.value, fact.detail)
                self.bag.add(event)

    def _read(self, event: Event, module: str, installed: bool, kind: str, message: str) -> None:
        name = kind.rsplit(".", 1)[-1]
        refusal = name in REFUSALS or (asserts(name, message) and (
            module.rsplit(".", 1)[-1] in CONFIG_MODULES or INCOMPATIBLE.search(message)
            or names_setting(message)))
        if not refusal or "memory" in message.lower():
            return
        if name == "TypeError" and SIGNATURE.search(message):
            if installed and module not in USER_CALLERS and self.mismatch is None:
                self.mismatch = (module, message)
                self.bag.add(event)
        elif (installed and (in_stack(module) or STACK_WORDS.search(message))
              and self.refused is None):
            self.refused = (module, kind, message)
            self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if self.mismatch is not None:
            module, message = self.mismatch
            text = _("Code in {module} called a function with arguments it does not take "
                     "({message}): the installed packages were not released together (one "
                     "upgraded or pinned apart from a package it calls).",
                     module=module, message=message)
            fix = _("Install releases that go together: pip check lists the requirements "
                    "that are not met, and the calling package's release notes name the "
                    "versions it needs. Every node needs the same ones.")
            return made("version-mismatch", "error", text, fix, merge(self.bag.items))
        if self.refused is not None and self.refused[0].startswith(RENDEZVOUS):
            module, kind, message = self.refused
            text = _("{module} refused the rendezvous settings ('{kind}: {message}'): the "
                     "endpoint, backend, node count or a rendezvous option given to the launcher "
                     "is one it does not accept.", module=module, kind=kind, message=message)
            fix = _("Correct the setting the message names, the same on every node: "
                    "--rdzv-endpoint HOST:PORT (a port number), --rdzv-backend c10d, --nnodes N "
                    "or MIN:MAX; ddpkit launch --dry-run prints the torchrun command it would "
                    "run.")
            return made("rendezvous-config", "error", text, fix, merge(self.bag.items))
        if self.refused is not None and self.refused[0] == UNKNOWN_SITE:
            _site, kind, message = self.refused
            text = _("A setting of the distributed run was refused ('{kind}: {message}'); no "
                     "traceback frame comes right before it, so the log does not say which code "
                     "raised it: a launcher flag, a config value or an argument of the script's "
                     "call is one it does not accept.", kind=kind, message=message)
            fix = _("Change the value the message names (in the launch command, the config file "
                    "or the call in the script); the run fails the same way on every rerun until "
                    "then. The run's full output holds the traceback above the message, which "
                    "names the code that refused it.")
            return made("invalid-usage", "error", text, fix, merge(self.bag.items))
        if self.refused is not None:
            module, kind, message = self.refused
            text = _("{module} refused what it was given ('{kind}: {message}'): a launcher "
                     "flag, a config value or an argument of the script's call is one the "
                     "package does not accept.", module=module, kind=kind, message=message)
            fix = _("Change the value the message names (in the launch command, the config "
                    "file or the call in the script) to one {module} accepts; the run fails "
                    "the same way on every rerun until then.", module=module)
            return made("invalid-usage", "error", text, fix, merge(self.bag.items))
        return None
