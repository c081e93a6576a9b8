"""A CUDA or NCCL library the dynamic loader could not load: the build does not fit the machine.

glibc's loader (dlerror(3)) says "libnccl.so.2: cannot open shared object file: No such file or
directory" when no directory on the search path holds a library a program needs, and "<path>/
libtorch_cuda.so: undefined symbol: ncclCommRegister" when the library it found is of another
version than the one the program was built against (the facts' ``CUDA_LIBRARY``). For torch and
the libraries it loads this is a build made for another CUDA or NCCL than the machine has: a
wheel for another CUDA, a system NCCL or CUDA on LD_LIBRARY_PATH shadowing the one torch's
nvidia-* wheels bring, or a framework (Paddle, MPI builds, nccl-tests) built against a CUDA
that is not installed.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.log.causes.base import NotingValues
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class CudaLibrary(NotingValues):
    needs = frozenset({FactKind.CUDA_LIBRARY})
    specificity = 15
    finding_id = "version-mismatch"
    supersedes = GENERIC | {"cuda-error", "internal-error"}

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        self.note(event, [f.value if f.detail == "missing" else
                          _("{library} without {symbol}", library=f.value, symbol=f.detail)
                          for f in facts if f.kind is FactKind.CUDA_LIBRARY])

    def words(self) -> tuple[str, str]:
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
