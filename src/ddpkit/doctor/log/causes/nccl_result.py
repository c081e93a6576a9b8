"""The result code a failure in NCCL returned with: by its name, or from its return chain.

NCCL's calls return an ncclResult_t (nccl.h). The failure names it where it is reported: torch's
``NCCL error in: <where>, <ncclGetErrorString text>`` and its detail line (``ncclInvalidUsage:
This usually reflects invalid usage of NCCL library.``), nccl-tests' ``NCCL failure <where>
'<text>'``. With NCCL_DEBUG=INFO, NCCL also prints ``<file>:<line> -> <code>`` at each level a
failed call returns through (src/include/checks.h, NCCLCHECK: ``INFO(NCCL_ALL,"%s:%d -> %d",
...)``). A failure warns where it starts (``NCCL WARN ...``) and its chain follows, so the line
after each WARN is read for it (patterns.FOLLOW; reading every INFO line for an arrow would cost
the scan's speed on the retry loops that fill real logs). The first result read is the
failure's own: the WARN line before a chain often comes from a template no catalogue knows (a
topology XML attribute, a plugin's own message), yet the code says what kind of failure NCCL
itself took it for. Only the results whose meaning is a finding are named here:
ncclInternalError, and ncclInvalidArgument or ncclInvalidUsage (a setting or a call NCCL
refused), and a code the library cannot name (ncclGetErrorString's default, "unknown result
code": a code from another NCCL release, version-mismatch). ncclSystemError and ncclRemoteError
are the network's and the peers', which the errno and connection rules read;
ncclUnhandledCudaError is CUDA's (unhandled_cuda.py).
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding, Severity
from ddpkit.doctor.log.causes.base import Context, Noting, made
from ddpkit.doctor.log.evidence import merge
from ddpkit.doctor.log.facts.kinds import UNKNOWN_RESULT, Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

_FINDINGS = {"ncclInternalError": "internal-error", "ncclInvalidArgument": "invalid-usage",
             "ncclInvalidUsage": "invalid-usage", UNKNOWN_RESULT: "version-mismatch"}


class NcclResult(Noting):
    needs = frozenset({FactKind.NCCL_RETURN, FactKind.NCCL_RESULT})
    specificity = 0  # any rule that reads the failure's own line says more
    supersedes = GENERIC

    def __init__(self) -> None:
        super().__init__()
        self.first: str | None = None  # the first result read: the failure's own

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        codes = [f.value for f in facts if f.kind in self.needs]
        if codes and self.first is None:
            self.first = codes[0]
        if codes and codes[0] == self.first:
            self.note(event, codes[:1])

    def finding(self, context: Context) -> Finding | None:
        finding_id = _FINDINGS.get(self.first or "")
        if finding_id is None:
            return None
        text = _("NCCL's failing call returned {result}: the lines before it (NCCL's WARN, "
                 "torch's \"Last error:\") say what NCCL checked.", result=self.first)
        if self.first == UNKNOWN_RESULT:
            text = _("NCCL's failing call returned a result code the NCCL library that named it "
                     "does not know ('unknown result code'): the code came from another NCCL "
                     "release than that library, so two NCCL builds are in the process (the one "
                     "torch bundles and a system or plugin one, or the one a program was built "
                     "against and an older one it loads).")
        words = [text]
        if self.first == "ncclInvalidUsage":
            words.append(_("NCCL also returns it when two ranks use one GPU (its WARN says "
                           "\"Duplicate GPU detected\"): check that each rank selects its own "
                           "GPU (torch.cuda.set_device(local_rank)) and that the node has as "
                           "many GPUs as ranks."))
        severity: Severity = "error"
        return made(finding_id, severity, words, None, merge(self.bag.items))
