"""A library the build links (CUDA's, NCCL's, MPI's) that the dynamic loader could not load: the
build does not fit the machine.

glibc's loader (dlerror(3)) says "libnccl.so.2: cannot open shared object file: No such file or
directory" when no directory on the search path holds a library a program needs, and "<path>/
libtorch_cuda.so: undefined symbol: ncclCommRegister" when the library it found is of another
version than the one the program was built against (the facts' ``BUILD_LIBRARY``). For torch and
the libraries it loads this is a build made for another CUDA or NCCL than the machine has: a
wheel for another CUDA, a system NCCL or CUDA on LD_LIBRARY_PATH shadowing the one torch's
nvidia-* wheels bring, or a framework (Paddle, MPI builds, nccl-tests) built against a CUDA
that is not installed. An extension module (flash-attn, apex, DeepSpeed's ops, a framework's
kernels) missing one of torch's own C++ symbols (mangled in torch's namespaces: ``_ZN3c10``,
``_ZN2at``, ``_ZN5torch``) was compiled against another torch release than the one that loads it.
A torch built with the MPI backend (conda's and Homebrew's builds, builds from source) links the
MPI of the machine it was built on: importing it where that MPI is missing fails the same way
(glibc's "libmpi_cxx.so.40: cannot open shared object file", macOS dyld's "Library not loaded:
/usr/local/opt/open-mpi/lib/libmpi.40.dylib"). A library that misses a symbol of the C++
standard library (``_ZNSt...``, ``_ZSt...``) or whose needed libstdc++ version the loader does
not find ("version `GLIBCXX_3.4.29' not found (required by ...)") was compiled by a newer GCC than
the libstdc++.so.6 the process loaded; one that needs a GLIBC_ version was built on a system with
a newer glibc.
"""

from __future__ import annotations

import re

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.log.causes.base import NotingValues
from ddpkit.doctor.log.facts.kinds import TORCH_SYMBOL, Fact, FactKind
from ddpkit.doctor.log.facts.printed import (
    COMMUNICATION_LIB,
    CXX_RUNTIME_SYMBOL,
    CXX_RUNTIME_VERSION_TAGS,
    GLIBC_VERSION_TAG,
    RUNTIME_VERSION_TAGS,
)
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_TORCH_SYMBOL = re.compile(TORCH_SYMBOL)
_COMMUNICATION = re.compile(COMMUNICATION_LIB)


class BuildLibrary(NotingValues):
    needs = frozenset({FactKind.BUILD_LIBRARY})
    specificity = 15
    finding_id = "version-mismatch"
    supersedes = GENERIC | {"cuda-error", "internal-error"}

    def __init__(self) -> None:
        super().__init__()
        self.torch_abi = False  # an extension lacks one of torch's own symbols
        self.cxx_runtime = False  # a library needs a newer libstdc++ than the one loaded
        self.glibc = False  # a library needs a newer glibc than the machine's
        self.cuda = False  # a library of CUDA's or NCCL's (not only MPI's, UCC's, UCX's)

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        mine = [f for f in facts if f.kind is FactKind.BUILD_LIBRARY]
        self.torch_abi = self.torch_abi or any(_TORCH_SYMBOL.match(f.detail) for f in mine)
        self.cxx_runtime = self.cxx_runtime or any(
            CXX_RUNTIME_SYMBOL.match(f.detail) or f.detail.startswith(CXX_RUNTIME_VERSION_TAGS)
            for f in mine)
        self.glibc = self.glibc or any(f.detail.startswith(GLIBC_VERSION_TAG) for f in mine)
        self.cuda = self.cuda or any(not _COMMUNICATION.match(f.value) for f in mine)
        self.note(event, [f.value if f.detail == "missing" else
                          _("{library} needs {version}", library=f.value, version=f.detail)
                          if f.detail.startswith(RUNTIME_VERSION_TAGS) else
                          _("{library} without {symbol}", library=f.value, symbol=f.detail[:60])
                          for f in mine])

    def words(self) -> tuple[str, str]:
        if self.torch_abi:
            text = _("An extension module was compiled against another torch release than the "
                     "one that loads it ({libraries}): the symbol it needs is one of torch's "
                     "own C++ functions, and this torch does not have it.",
                     libraries=self.listed)
            fix = _("Rebuild or reinstall the extension for this torch (pip install --force-"
                    "reinstall --no-build-isolation <package>, or the wheel made for this torch "
                    "and CUDA), or install the torch it was built for: python -c \"import torch; "
                    "print(torch.__version__, torch.version.cuda)\" shows which torch loads it. "
                    "Every node needs the same builds.")
            return text, fix
        if self.cxx_runtime:
            text = _("A library was compiled by a newer C++ compiler than the C++ runtime this "
                     "process loaded ({libraries}): the libstdc++.so.6 found first is older than "
                     "the one it was built with, usually a conda environment's own.",
                     libraries=self.listed)
            fix = _("See which versions the loaded one has: strings \"$CONDA_PREFIX/lib/"
                    "libstdc++.so.6\" | grep GLIBCXX (the system's: /usr/lib/x86_64-linux-gnu/"
                    "libstdc++.so.6). Update the environment's (conda install -c conda-forge "
                    "libstdcxx-ng), put the newer one first (LD_PRELOAD or LD_LIBRARY_PATH), or "
                    "rebuild the library with this machine's compiler. Every node needs the same "
                    "builds.")
            return text, fix
        if self.glibc:
            text = _("A library was built on a system with a newer glibc than this machine's "
                     "({libraries}).", libraries=self.listed)
            fix = _("Install a build made for this machine's glibc (ldd --version shows it; a "
                    "manylinux wheel's name says the oldest glibc it runs on), build it here, or "
                    "run the job in a container with a newer distribution. Every node needs the "
                    "same builds.")
            return text, fix
        if not self.cuda:  # (MPI's, UCC's, UCX's: a build with the MPI backend)
            text = _("The dynamic loader could not load what the program was built against "
                     "({libraries}): the build links the MPI (or UCC/UCX) libraries of the "
                     "machine it was built on, and this machine has none of that version.",
                     libraries=self.listed)
            fix = _("Install the MPI the build was made with (the same release: Open MPI 4 "
                    "ships libmpi.so.40), or install a torch build without the MPI backend (pip's "
                    "wheels have none: pip install torch). ldd (otool -L on macOS) on the "
                    "failing library shows what it links. Every node needs the same builds.")
            return text, fix
        text = _("The dynamic loader could not load what the program was built against "
                 "({libraries}): the CUDA or NCCL libraries on this machine are not the ones "
                 "the build needs (a build for another CUDA, or another version of the library "
                 "found first on LD_LIBRARY_PATH).", libraries=self.listed)
        fix = _("Install the build for this machine's CUDA (nvidia-smi shows the driver's "
                "highest; pip's torch wheels bring their own CUDA and NCCL libraries), and "
                "remove LD_LIBRARY_PATH entries that point to another CUDA or NCCL: echo "
                "$LD_LIBRARY_PATH; ldd on the failing library shows which copy each dependency "
                "resolves to. Every node needs the same builds.")
        return text, fix
