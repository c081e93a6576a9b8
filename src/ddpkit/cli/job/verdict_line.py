"""`ddpkit test`'s last line, the one a user quotes: :meth:`ddpkit.clustertest.TestVerdict.headline`
as a translatable text whose numbers stay numbers (its English value is the headline itself, which
``--json`` carries as ``summary``; tests/unit/test_i18n_verdict_line.py keeps the two equal)."""

from __future__ import annotations

from ddpkit.clustertest import TestVerdict, _size_text
from ddpkit.i18n import Text, _, _n


def _shape(verdict: TestVerdict) -> Text:
    if verdict.nodes:
        return _("{nodes} × {ranks}", nodes=_n("{count} node", "{count} nodes", verdict.nodes),
                 ranks=_n("{count} rank", "{count} ranks", verdict.ranks_per_node or 1))
    return _n("{count} rank", "{count} ranks", len(verdict.ranks))


def _joined(parts: list[str]) -> Text:
    """``a; b; c`` as one text, each part translated."""
    text = _("{part}", part=parts[0])
    for part in parts[1:]:
        text = _("{first}; {then}", first=text, then=part)
    return text


def verdict_line(verdict: TestVerdict) -> Text:
    """The verdict in one line: the job's shape, then what passed (with the largest all_reduce's
    busbw and the interfaces the ranks used) or what failed and which ranks are stuck where."""
    shape = _shape(verdict)
    if not verdict.ok:
        # a failed check's words are the rank's own (its exception): quoted as they are
        problems: list[str] = verdict.failed_checks()
        hung = [_("rank {rank} stuck in {stage}", rank=rank, stage=stage)
                for rank, stage in sorted(verdict.stages.items())
                if stage not in ("done", "failed", "exchange")]
        parts = problems + hung
        return _("{shape}: FAILED · {problems}", shape=shape,
                 problems=_joined(parts) if parts else _("not every rank reported"))
    bandwidth = verdict._largest_bandwidth()
    via = ", ".join(sorted({name for r in verdict.ranks for name in r.get("interfaces_used", [])}))
    if bandwidth:
        return _("{shape}: all checks passed · all_reduce busbw {busbw:.2f} GB/s at {size} via "
                 "{via}", shape=shape, busbw=bandwidth["busbw_gbps"],
                 size=_size_text(bandwidth["bytes"]), via=via or "loopback")
    if via:
        return _("{shape}: all checks passed via {via}", shape=shape, via=via)
    return _("{shape}: all checks passed", shape=shape)
