"""What ddpkit makes of each catalogued message template (used by catalogue_messages.py)."""

from __future__ import annotations

import re

from msgextract import HOLE
from msgrules import RULES
from msgsource_rules import SOURCE_RULES

LEVEL_RANK = {"info": 0, "warning": 1, "error": 2}


def kind_of(mapping: str) -> str:
    if mapping == "benign":
        return "benign"
    if mapping == "unmapped":
        return "unmapped"
    if mapping == "unexplained-failure":
        return "generic"
    return "finding"


def matcher(template: str) -> str:
    """A regex (searched in a log line) for the template's longest line."""
    line = max(template.split("\n"), key=lambda s: len(s.replace(HOLE, "")))
    parts = line.split(HOLE)
    while parts and not parts[0].strip():
        parts.pop(0)
    while parts and not parts[-1].strip():
        parts.pop()
    if parts and line.rstrip().endswith(HOLE):
        # a value printed last may be empty, and a log's lines lose their trailing blanks
        parts[-1] = parts[-1].rstrip()
    return ".*?".join(re.escape(p) for p in parts)

_COMPILED = tuple((re.compile(w, re.I) if w else None, re.compile(t, re.I), m, r)
                  for w, t, m, r in RULES)
_SOURCE = tuple((re.compile(w) if w else None, re.compile(t), m, r) for w, t, m, r in SOURCE_RULES)
# What an NCCL WARN's code path returns (tools/msgresult.py): the codes that name a kind.
_CODES = frozenset({"ncclUnhandledCudaError", "ncclInvalidUsage", "ncclInvalidArgument",
                    "ncclInternalError", "ncclRemoteError", "ncclSystemError"})
# The catch-all wording rules (a word, not a cause) that a result code overrides.
_BROAD = {"peer-unreachable": "a connection", "rank-failed": "ranks or arguments"}
_CONFIG = re.compile(r"config|NCCL_[A-Z]|attribute|CTA", re.I)


def by_result(template: str, result: frozenset[str]) -> tuple[str, str] | None:
    """The mapping an NCCL WARN's result code gives (``msgresult.outcomes``), or None."""
    codes = sorted(result & _CODES)
    said = "returns " + "/".join(codes)
    if "ncclUnhandledCudaError" in codes:
        return "cuda-error", f"{said}: a CUDA call failed"
    if "ncclInvalidUsage" in codes or ("ncclInvalidArgument" in codes and (
            "api" in result or _CONFIG.search(template))):
        return "invalid-usage", f"{said}: the program's call or an NCCL setting/config is invalid"
    if "ncclInternalError" in codes or "ncclInvalidArgument" in codes:
        return "internal-error", f"{said}: an internal check (NCCL's own state or arguments)"
    if "ncclRemoteError" in codes:
        return "connection-lost", f"{said}: a peer's process exited or the network failed"
    if codes:
        return ("unexplained-failure", f"{said}: a system call failed; the call and its errno "
                "are in the line (any call: socket, poll, file), and no finding names them all")
    if result and result <= {"continues", "ncclSuccess", "api"}:
        return "benign", "NCCL warns and goes on: no error return follows the WARN"
    if result & {"propagated", "returns"}:
        return ("unexplained-failure", "returns the error of a call it made (or ends its "
                "thread) without a code of its own: the source cannot say more")
    return None
MIN_MATCHER_LITERAL = 10  # characters of literal text a matcher needs to be recognised


# Python's builtin exceptions whose documented meaning is a refused argument: ValueError ("an
# argument that has the right type but an inappropriate value"), TypeError (an object "of
# inappropriate type"), NotImplementedError (a case not supported)
_REFUSING_RAISES = frozenset({"raise ValueError", "raise TypeError", "raise NotImplementedError"})
# torch's own words for a failed check of its own state: "This indicates a bug in DDP, please
# report an issue to PyTorch", "BUG! Expected rank_cond to be true"
_TORCH_BUG = re.compile(r"indicates a bug|[Pp]lease report (?:an issue|a bug|this)|\bBUG!")


def classify(source: str, file: str, template: str, level: str,
             result: frozenset[str] = frozenset(), call: str = "") -> tuple[str, str]:
    """(finding id | "benign" | "unexplained-failure" | "unmapped", why) for one template;
    ``result``: what an NCCL WARN's code path returns (``msgresult.outcomes``); ``call``: what
    prints or raises it (``raise ValueError``)."""
    literal = max(len(p) for p in matcher(template).split(".*?")) if template else 0
    if source == "aws-ofi-nccl":  # its files' paths are like NCCL's own (src/..., include/...)
        if level != "error":  # NCCL_OFI_INFO: what the plugin chose or tried; it fails in a WARN
            return "benign", "the net plugin's INFO line (its failures are its WARN lines)"
        file = f"{source}/{file}"
    if source == "torch" and level == "error" and _TORCH_BUG.search(template):
        return "internal-error", "torch says the check that failed is a bug of its own"
    for where, what, maps, why in _SOURCE:
        if (where is None or where.search(file)) and what.search(template):
            return maps, why
    for where, what, maps, why in _COMPILED:
        if (where is None or where.search(file)) and what.search(template):
            coded = by_result(template, result) if maps == "internal-error" else None
            if coded and coded[0] in ("invalid-usage", "connection-lost"):
                maps, why = coded  # a check's wording, in a public function, on a setting, or
                # on a socket the peer closed (ncclRemoteError)
            if where is None and maps in _BROAD and result & _CODES == {"ncclInternalError"}:
                # a word such as "connect" or "ranks" in an assertion of NCCL's own state
                maps, why = "internal-error", ("returns ncclInternalError: an internal check "
                                               "(its wording only mentions " + _BROAD[maps] + ")")
            failing = (r"retry|timeout|timed out|refused|closed|abort|exceed" if level == "info"
                       else r"fail|error|retry|timeout|timed out|refused|closed|abort|exceed")
            if (level != "error" and maps not in ("benign", "stopped-while-waiting")
                    and not re.search(failing, template, re.I)):
                # NCCL INFO "Failed to open libibverbs": a fallback, not a failure
                return "benign", f"{level} line (nothing failed) about: " + why
            return maps, why
    if (source == "torch" and level == "error" and file.startswith("torch/distributed/")
            and call.startswith(("raise ", "logger.")) and literal >= MIN_MATCHER_LITERAL):
        # the rest of torch.distributed's APIs (catalogue_messages.TORCH_MORE_FILES), where no
        # rule above read the template
        if call in _REFUSING_RAISES:
            return "invalid-usage", (f"torch.distributed's API {call[6:]}: by Python's documented "
                                     "meaning, an argument or a case it does not accept, from "
                                     "the program that called it")
        return "unexplained-failure", (f"torch.distributed's API ({call}): a check of its own "
                                       "state or of what it computed, which no launch setting "
                                       "explains; the line names what failed")
    if level == "info":
        return "benign", "informational (NCCL INFO / LOG(INFO) / logger.info)"
    if level == "warning":
        return "benign", "a warning that does not stop the run"
    if literal < MIN_MATCHER_LITERAL:
        return "unmapped", "too little literal text to recognise in a log"
    coded = by_result(template, result)
    if coded:
        return coded
    return ("unexplained-failure",
            "an internal check or error with no setup cause: reported as a failure seen, "
            "with the next step")
