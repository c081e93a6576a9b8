"""The bench's advice from its scaling rows: each row's sanity check, why a run's rows are not
comparable, and the recommendation (never from a failed row or one that failed its check).

Pure: rows as :func:`ddpkit.bench.merge.scaling_row` makes them go in, JSON-able dicts come out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ddpkit.bench.planning.model import parse_setting
from ddpkit.bench.planning.plan import cost_of
from ddpkit.i18n import _
from ddpkit.wording import clauses, commas

NOISY_SPREAD = 0.25  # the 1-node reference moved this much between before and after
IMPOSSIBLE = 1.1  # efficiency above this is impossible where nothing shortens the N-node step


def sanity(reference: Mapping[str, Any], efficiency: float, ranks_per_node: int,
           setting: str = "") -> dict[str, Any]:
    """The row's sanity check: a row that fails it (``noisy``, ``noise`` says why) is shown marked,
    never ranked, and the verdict asks for the run to be repeated.

    The reference is measured before and after the N-node phase; if the two differ by more than
    25% of their mean, the machine changed speed meanwhile. With one rank per node (or for plain
    DDP at any size), efficiency above 110% is impossible: N nodes do the same compute plus
    communication, so the two measurements were not made under the same conditions.
    """
    before, after = reference.get("before_step_s"), reference.get("after_step_s")
    spread = abs(after - before) / ((after + before) / 2) if before and after else None
    why = []
    if spread is not None and spread > NOISY_SPREAD:
        why.append(_("the 1-node reference moved {spread:.0%} during the job", spread=spread))
    if efficiency > IMPOSSIBLE and ranks_per_node == 1:
        why.append(_("{efficiency:.0%} efficiency is impossible with one rank per node",
                     efficiency=efficiency))
    elif efficiency > IMPOSSIBLE and setting == "none":
        why.append(_("{efficiency:.0%} efficiency is impossible for plain DDP",
                     efficiency=efficiency))
    noise = None if not why else why[0] if len(why) == 1 else _("{first}; {second}",
                                                                  first=why[0], second=why[1])
    return {"reference_spread": spread, "noisy": bool(why), "noise": noise}


def thread_cause(docs: Sequence[Mapping[str, Any]]) -> str | None:
    """Why the nodes' measurements are not comparable, where the workers' documents show it: the
    nodes ran the 1-node reference with different numbers of intra-op threads (one node without
    ``OMP_NUM_THREADS=1``, say). None when they agree or did not say."""
    for doc in docs:
        entry = (doc.get("phases", {}).get("one_node", {}).get("none") or {})
        threads = entry.get("per_node_threads") or []
        counts = [item[0] if isinstance(item, list) and item else None for item in threads]
        if len(counts) < 2 or None in counts or len(set(counts)) < 2:
            continue
        said = []
        for node, item in enumerate(threads):
            omp = item[1] if len(item) > 1 else None
            said.append(_("node {node}: {count} (OMP_NUM_THREADS={value})", node=node,
                          count=item[0], value=omp) if omp is not None else
                        _("node {node}: {count} (OMP_NUM_THREADS unset)", node=node,
                          count=item[0]))
        return _("the nodes ran with different thread counts ({counts}): give every node the "
                 "same OMP_NUM_THREADS (e.g. --env OMP_NUM_THREADS=1) and run the bench again",
                 counts=commas(said))
    return None


def recommend(rows: Sequence[Mapping[str, Any]], *, nodes: int, threshold: float,
              cause: str | None = None) -> dict[str, Any]:
    """The least invasive setting that ran OK, passed its sanity check and reached ``threshold``;
    never a failed one, never one that failed the check (``noisy``). A check that failed asks for
    the run to be repeated (``repeat``, with ``cause`` where the workers showed one); when plain
    DDP's own measurement failed it, or every one did, nothing is recommended."""
    failed = sorted(r["setting"] for r in rows if not r.get("ok"))
    measured = [r for r in rows if r.get("ok") and r.get("efficiency") is not None]
    rated = [r for r in measured if not r.get("noisy")]
    suspect = [r for r in measured if r.get("noisy")]
    repeat = None
    if suspect:
        why = clauses([_("{setting} {efficiency:.0%}: {noise}", setting=r["setting"],
                         efficiency=r["efficiency"],
                         noise=r.get("noise") or _("failed the sanity check"))
                       for r in suspect])
        repeat = (_("repeat the run: {why}; {cause}", why=why, cause=cause) if cause else
                  _("repeat the run on a quiet machine, the same way on every node: {why}",
                    why=why))
    more: list[str] = []
    if failed:
        more.append(_("Failed here, never recommended: {settings}.", settings=", ".join(failed)))
    not_judged = [str(r["setting"]) for r in suspect]
    base = {"failed": failed, "not_judged": not_judged, "repeat": repeat}

    def told(text: str) -> str:
        for sentence in more:
            text = _("{text} {more}", text=text, more=sentence)
        return text

    pct = f"{threshold:.0%}"
    if nodes < 2:
        return {**base, "decision": "undecided", "setting": None, "efficiency": None,
                "text": _("undecided: one node has nothing to compare with; run the bench on 2+ "
                          "nodes"), "cost": None}
    plain = next((r for r in measured if r["setting"] == "none"), None)
    if repeat and (not rated or (plain is not None and plain.get("noisy"))):
        return {**base, "decision": "undecided", "setting": None, "efficiency": None,
                "text": told(_("undecided: these measurements failed their own sanity check, "
                               "so none is advice; {repeat}.", repeat=repeat)), "cost": None}
    if repeat:
        more.insert(0, _("Not judged (failed the sanity check): {settings}; {repeat}.",
                         settings=", ".join(not_judged), repeat=repeat))
    if not rated:
        return {**base, "decision": "undecided", "setting": None, "efficiency": None,
                "text": told(_("undecided: no setting ran OK on {nodes} nodes.", nodes=nodes)),
                "cost": None}
    plain_text = f"{plain['efficiency']:.0%}" if plain else _("failed")
    passing = sorted((r for r in rated if r["efficiency"] >= threshold),
                     key=lambda r: (parse_setting(r["setting"]).invasiveness, -r["efficiency"]))
    if passing:
        pick = passing[0]
        eff = pick["efficiency"]
        if pick["setting"] == "none":
            text = _("go multi-node: plain DDP keeps {eff:.0%} measured efficiency on {nodes} "
                     "nodes, {speed:.2f}x one node's throughput (threshold {pct}).", eff=eff,
                     nodes=nodes, speed=eff * nodes, pct=pct)
        else:
            text = _("go multi-node with {setting}: {eff:.0%} measured efficiency on {nodes} "
                     "nodes, {speed:.2f}x one node's throughput (plain DDP: {plain}; "
                     "threshold {pct}).", setting=pick["setting"], eff=eff, nodes=nodes,
                     speed=eff * nodes, plain=plain_text, pct=pct)
        return {**base, "decision": "go-multi-node", "setting": pick["setting"],
                "efficiency": eff, "text": told(text),
                "cost": cost_of(parse_setting(pick["setting"]))}
    best = max(rated, key=lambda r: (r["efficiency"], r["setting"]))
    eff = best["efficiency"]
    speed = (_("{nodes} nodes would be slower than one ({speed:.2f}x)", nodes=nodes,
               speed=eff * nodes) if eff * nodes <= 1
             else _("{nodes} nodes would give {speed:.2f}x the throughput for {nodes}x the "
                    "machines", nodes=nodes, speed=eff * nodes))
    return {**base, "decision": "stay-on-one-node", "setting": best["setting"], "efficiency": eff,
            "text": told(_("stay on one node: the best setting that ran ({setting}) reaches "
                           "{eff:.0%} measured efficiency on {nodes} nodes, under the {pct} "
                           "threshold (plain DDP: {plain}); {speed}.", setting=best["setting"],
                           eff=eff, nodes=nodes, pct=pct, plain=plain_text, speed=speed)),
            "cost": cost_of(parse_setting(best["setting"]))}
