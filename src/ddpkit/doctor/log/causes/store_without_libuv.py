"""torch's TCPStore asked for libuv by a build that has none.

From torch 2.3 the c10d store (torch/csrc/distributed/c10d/TCPStore.cpp) can run on libuv, and
torch 2.4 made it the default where torchrun and ``init_process_group`` create the store
(``USE_LIBUV``, default 1). A build without libuv (the Windows wheels of those releases) refuses:
"use_libuv was requested but PyTorch was build without libuv support, run with USE_LIBUV=0 to
disable it." The rendezvous store is never created, so no rank gets past its start (the facts'
``STORE_WITHOUT_LIBUV``). It is a setting torch refused: invalid-usage, as the message catalogue
files the message (tools/msgmap.py).
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.log.causes.base import NotingValues
from ddpkit.doctor.log.facts.kinds import FactKind
from ddpkit.i18n import _


class StoreWithoutLibuv(NotingValues):
    needs = frozenset({FactKind.STORE_WITHOUT_LIBUV})
    specificity = 20
    finding_id = "invalid-usage"
    supersedes = GENERIC | {"peer-unreachable", "rendezvous-timeout"}

    def words(self) -> tuple[str, str]:
        text = _("The rendezvous store could not be created: it was asked to run on libuv, "
                 "which this build of torch does not have (the Windows wheels of torch 2.4 and "
                 "later ask for it by default), so no rank got past its start.")
        fix = _("Start the job with USE_LIBUV=0 in every node's environment (Windows: set "
                "USE_LIBUV=0), or pass use_libuv=0 in the init method's URL "
                "(tcp://<addr>:<port>?use_libuv=0); a single-GPU run needs no store: "
                "CUDA_VISIBLE_DEVICES=0 with one process.")
        return text, fix
