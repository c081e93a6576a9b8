"""causes/cuda_library.py: the dynamic loader failing on a CUDA or NCCL library is
version-mismatch; and torch.multiprocessing's report of a process a signal ended is a failure.
Sources of the lines:

- glibc's dlerror(3) texts (elf/dl-load.c, "cannot open shared object file"; elf/dl-lookup.c,
  "undefined symbol: %s"), as CPython's ImportError ("<lib>: cannot open shared object file: No
  such file or directory") and ctypes' OSError print them
- torch v2.4.0 torch/multiprocessing/spawn.py, ProcessContext.join: ``raise
  ProcessExitedException("process %d terminated with signal %s" % (error_index, name), ...)``
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

TRACE = ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>',
         "    import torch"]


@pytest.mark.parametrize("line", [
    "ImportError: libnccl.so.2: cannot open shared object file: No such file or directory",
    "OSError: libcudart.so.11.0: cannot open shared object file: No such file or directory",
    "ImportError: /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so: undefined "
    "symbol: ncclCommRegister",
    "OSError: /opt/conda/lib/python3.8/site-packages/nvidia/cublas/lib/libcublas.so.11: "
    "undefined symbol: cublasLtGetStatusString, version libcublasLt.so.11",
    # ld.so at run time (elf/dl-runtime.c's lazy binding: "symbol lookup error: %s: undefined
    # symbol: %s"), a library of the program's own missing an NCCL symbol
    "./GRAPH_TEST: symbol lookup error: /opt/conda/lib/libwholegraph.so: undefined symbol: "
    "ncclCommSplit",
])
def test_a_cuda_library_that_does_not_load_is_a_version_mismatch(tmp_path: Path,
                                                                  line: str) -> None:
    found = top(tmp_path, [*TRACE, line])
    assert (found.id, found.severity) == ("version-mismatch", "error")
    assert "LD_LIBRARY_PATH" in found.fix
    library = line.split(".so")[0].rsplit("/", 1)[-1].split()[-1]
    assert library in found.explanation


def test_another_library_is_not_a_cuda_mismatch(tmp_path: Path) -> None:
    found = top(tmp_path, [*TRACE, "ImportError: libGL.so.1: cannot open shared object file: "
                                   "No such file or directory"])
    assert found.id != "version-mismatch"
    found = top(tmp_path, ["./app: symbol lookup error: /usr/lib/libfoo.so.2: undefined symbol: "
                           "png_set_longjmp_fn"])
    assert found.id != "version-mismatch"


@pytest.mark.parametrize("plugin", ["libnccl-net.so", "libnccl-tuner.so", "libnccl-net-ofi.so"])
def test_nccls_optional_plugin_missing_is_no_mismatch(tmp_path: Path, plugin: str) -> None:
    # NCCL v2.19 src/net.cc: INFO(NCCL_INIT|NCCL_NET, "NET/Plugin : dlerror=%s No plugin found
    # (%s), using internal implementation", dlerror(), name): an optional plugin, then NCCL goes on
    found = top(tmp_path, [f"node1:1:1 [0] NCCL INFO NET/Plugin : dlerror={plugin}: cannot open "
                           f"shared object file: No such file or directory No plugin found "
                           f"({plugin}), using internal implementation"])
    assert found.id != "version-mismatch" and found.severity != "error"


@pytest.mark.parametrize(("signal", "finding"), [("SIGSEGV", "unexplained-failure"),
                                                 ("SIGKILL", "out-of-memory"),
                                                 ("SIGBUS", "shm")])
def test_a_spawned_process_a_signal_ended_is_a_failure(tmp_path: Path, signal: str,
                                                       finding: str) -> None:
    found = top(tmp_path, ["Traceback (most recent call last):",
                           '  File "/usr/lib/python3/dist-packages/torch/multiprocessing/spawn.py",'
                           " line 140, in join",
                           "    raise ProcessExitedException(",
                           "torch.multiprocessing.spawn.ProcessExitedException: process 1 "
                           f"terminated with signal {signal}"])
    assert (found.id, found.severity) == (finding, "error")
