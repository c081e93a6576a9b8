"""torch.distributed built without the backend the job asks for.

torch's ``distributed_c10d.py`` (v1.8 to v2.x, ``_new_process_group_helper``) raises
``RuntimeError("Distributed package doesn't have NCCL built in")`` when ``backend="nccl"`` meets a
build without NCCL (the Windows and macOS wheels, a CPU-only build); MPI and UCC likewise. The
facts' ``BACKEND_MISSING`` reads the message and the traceback's raise line.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.log.causes.base import NotingValues
from ddpkit.doctor.log.facts.kinds import FactKind
from ddpkit.i18n import _


class NoBackend(NotingValues):
    needs = frozenset({FactKind.BACKEND_MISSING})
    specificity = 20
    finding_id = "invalid-usage"
    supersedes = GENERIC

    def words(self) -> tuple[str, str]:
        text = _("This build of torch has no {backends} backend: torch.distributed refused to "
                 "create the process group (the Windows and macOS wheels ship without NCCL).",
                 backends=self.listed)
        fix = _("Use the gloo backend where the build has no NCCL: "
                "init_process_group(backend=\"gloo\") (or the job's own backend setting), or run "
                "on Linux with a CUDA build of torch: python -c \"import torch.distributed as d; "
                "print(d.is_nccl_available())\"")
        return text, fix
