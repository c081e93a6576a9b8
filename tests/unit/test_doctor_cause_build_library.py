"""causes/build_library.py: the dynamic loader failing on a CUDA, NCCL or MPI library is
version-mismatch; and torch.multiprocessing's report of a process a signal ended is a failure.
Sources of the lines:

- glibc's dlerror(3) texts (elf/dl-load.c, "cannot open shared object file"; elf/dl-lookup.c,
  "undefined symbol: %s"; elf/dl-version.c, "version `%s' not found (required by %s)"), as
  CPython's ImportError ("<lib>: cannot open shared object file: No such file or directory") and
  ctypes' OSError print them; macOS dyld's "Library not loaded: %s"
- the Itanium C++ ABI's mangling of the symbols the loader names (std:: is "St": _ZSt..., _ZNSt...,
  a vtable _ZTV..., a const member _ZNK...)
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


# a torch built with the MPI backend, imported where that MPI is missing: glibc's text, and
# macOS dyld's ("dlopen(%s, %d): Library not loaded: %s", "Referenced from: %s", "Reason: image
# not found"; dyld 4, macOS 12 on, "(no such file)")
@pytest.mark.parametrize(("lines", "library"), [
    (["ImportError: libmpi_cxx.so.40: cannot open shared object file: No such file or "
      "directory"], "libmpi_cxx.so.40"),
    (["ImportError: dlopen(/opt/env/lib/python3.9/site-packages/torch/_C.cpython-39-darwin.so, 2): "
      "Library not loaded: /usr/local/opt/open-mpi/lib/libmpi.40.dylib",
      "  Referenced from: /opt/env/lib/python3.9/site-packages/torch/lib/libtorch_cpu.dylib",
      "  Reason: image not found"], "libmpi.40.dylib"),
    (["ImportError: dlopen(/opt/env/lib/python3.11/site-packages/torch/_C.cpython-311-darwin.so, "
      "0x0002): Library not loaded: @rpath/libucc.1.dylib"], "libucc.1.dylib"),
])
def test_the_mpi_a_build_links_missing_is_a_build_that_does_not_fit(
        tmp_path: Path, lines: list[str], library: str) -> None:
    found = top(tmp_path, [*TRACE, *lines])
    assert (found.id, found.severity) == ("version-mismatch", "error")
    assert library in found.explanation and "MPI" in found.explanation
    assert "pip install torch" in found.fix and "LD_LIBRARY_PATH" not in found.fix


def test_a_library_dyld_names_that_no_build_links_is_not_a_mismatch(tmp_path: Path) -> None:
    found = top(tmp_path, [*TRACE, "ImportError: dlopen(/x/_imaging.so, 2): Library not loaded: "
                                   "/usr/local/opt/libtiff/lib/libtiff.5.dylib"])
    assert found.id != "version-mismatch"


def test_another_library_is_not_a_cuda_mismatch(tmp_path: Path) -> None:
    found = top(tmp_path, [*TRACE, "ImportError: libGL.so.1: cannot open shared object file: "
                                   "No such file or directory"])
    assert found.id != "version-mismatch"
    found = top(tmp_path, ["./app: symbol lookup error: /usr/lib/libfoo.so.2: undefined symbol: "
                           "png_set_longjmp_fn"])
    assert found.id != "version-mismatch"


# Itanium C++ ABI mangling (_ZN <length><name>... E <parameters>) of a function in one of torch's
# namespaces, as glibc's dlerror prints the missing symbol: c10::cuda::SetDevice(int),
# at::_ops::empty_memory_format::call(...) (a const member: _ZNK), torch::autograd::...
@pytest.mark.parametrize("symbol", ["_ZN3c104cuda9SetDeviceEi",
                                    "_ZN2at4_ops19empty_memory_format4callEv",
                                    "_ZNK3c1010TensorImpl5sizesEv",
                                    "_ZN5torch8autograd12VariableInfoC1Ev"])
@pytest.mark.parametrize("extension", ["flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so",
                                       "/opt/conda/lib/python3.8/site-packages/apex/"
                                       "amp_C.cpython-38-x86_64-linux-gnu.so"])
def test_an_extension_without_torchs_symbol_was_built_for_another_torch(
        tmp_path: Path, symbol: str, extension: str) -> None:
    found = top(tmp_path, [*TRACE, f"ImportError: {extension}: undefined symbol: {symbol}"])
    assert (found.id, found.severity) == ("version-mismatch", "error")
    assert "another torch release" in found.explanation
    assert extension.rsplit("/", 1)[-1] in found.explanation and "LD_LIBRARY_PATH" not in found.fix


def test_an_extension_without_its_own_symbol_is_not_a_torch_mismatch(tmp_path: Path) -> None:
    # a symbol of the extension's own library, not torch's or the C++ runtime's
    found = top(tmp_path, [*TRACE, "ImportError: /x/sentencepiece.cpython-38-x86_64-linux-gnu.so: "
                                   "undefined symbol: _ZN13sentencepiece4util6StatusC1Ev"])
    assert found.id != "version-mismatch"


# a function of NCCL's or CUDA's API (the library's prefix, then a capital) an extension module
# misses: the NCCL or CUDA it loaded is older than the one it was built against
@pytest.mark.parametrize("symbol", ["ncclCommInitRankScalable", "ncclMemAlloc",
                                    "cudaGetDriverEntryPointByVersion", "cublasLtMatmul"])
def test_an_extension_without_a_cuda_or_nccl_function_is_a_build_that_does_not_fit(
        tmp_path: Path, symbol: str) -> None:
    extension = "_C.cpython-312-x86_64-linux-gnu.so"
    found = top(tmp_path, [*TRACE, f"ImportError: /opt/pkg/{extension}: undefined symbol: {symbol}"])
    assert (found.id, found.severity) == ("version-mismatch", "error")
    assert extension in found.explanation and symbol in found.explanation
    assert "LD_LIBRARY_PATH" in found.fix


def test_an_extensions_own_function_named_after_cuda_is_no_library_mismatch(
        tmp_path: Path) -> None:
    # no capital after the prefix: the extension's own kernel wrapper, not CUDA's API
    found = top(tmp_path, [*TRACE, "ImportError: /x/_ext.cpython-38-x86_64-linux-gnu.so: "
                                   "undefined symbol: cuda_nms_forward"])
    assert found.id != "version-mismatch"


# One of the C++ standard library's symbols a library misses: std::__throw_bad_array_new_length()
# (GCC 11's libstdc++), std::__exception_ptr::exception_ptr::_M_addref(), a vtable of
# std::__cxx11::basic_stringstream, a const member of std::error_category
@pytest.mark.parametrize("symbol", ["_ZSt28__throw_bad_array_new_lengthv",
                                    "_ZNSt15__exception_ptr13exception_ptr9_M_addrefEv",
                                    "_ZTVNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEEE",
                                    "_ZNKSt14error_category10equivalentEiRKSt15error_condition"])
def test_a_library_without_a_cxx_runtime_symbol_was_built_by_a_newer_compiler(
        tmp_path: Path, symbol: str) -> None:
    extension = "ext_cpp.cpython-39-x86_64-linux-gnu.so"
    found = top(tmp_path, [*TRACE, f"ImportError: /env/lib/{extension}: undefined symbol: {symbol}"])
    assert (found.id, found.severity) == ("version-mismatch", "error")
    assert "C++ runtime" in found.explanation and extension in found.explanation
    assert "GLIBCXX" in found.fix and "another torch release" not in found.explanation


# glibc's loader on a library needing a newer libstdc++ (GLIBCXX_, CXXABI_) or glibc (GLIBC_)
# version than the one it found (elf/dl-version.c: "%s: version `%s' not found (required by %s)";
# the quotes as glibc 2.38 and later print them too)
@pytest.mark.parametrize(("version", "quote", "words"), [
    ("GLIBCXX_3.4.30", "`", "C++ runtime"), ("CXXABI_1.3.13", "'", "C++ runtime"),
    ("GLIBC_2.32", "`", "newer glibc")])
@pytest.mark.parametrize("exception", ["ImportError", "OSError"])
def test_a_library_needing_a_newer_runtime_version_is_a_build_that_does_not_fit(
        tmp_path: Path, version: str, quote: str, words: str, exception: str) -> None:
    runtime = "libstdc++.so.6" if not version.startswith("GLIBC_") else "libc.so.6"
    needer = "/opt/env/lib/python3.10/site-packages/pkg/_ops.cpython-310-x86_64-linux-gnu.so"
    found = top(tmp_path, [*TRACE, f"{exception}: /opt/env/lib/{runtime}: version {quote}{version}' "
                                   f"not found (required by {needer})"])
    assert (found.id, found.severity) == ("version-mismatch", "error")
    assert words in found.explanation and version in found.explanation
    assert needer.rsplit("/", 1)[-1] in found.explanation


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
