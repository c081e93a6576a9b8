"""`ddpkit bench --strategies ddp,fsdp,hsdp` on a 2-node x 2-rank sim shaped to 1 Gbit, repeated,
each run's step time against `ddpkit plan`'s prediction (issue 34: within +-25% in 8 of 9 runs).

Brings up its own sim cluster per run (``--name``/``--subnet``, default ``dkstr`` on
10.213.113.0/24; always torn down), runs the same bench as
``tests/integration/test_bench_strategies_sim.py`` (``--quick --collectives --strategies
ddp,fsdp,hsdp --params 8M --batch 8``, one thread per rank), keeps every run's directory under
``--keep`` and prints per run and strategy: the 1-node reference, the 2-node step, plan's
prediction with its terms (compute, communication, exposed communication) and measured / plan.

``--from DIR`` recomputes the prediction from runs kept earlier (plan's current model on the same
measurements; the measurements do not depend on the model), without running anything.

    sudo python benchmarks/strategies_sim.py [--runs 9] [--keep DIR] [--check]
    python benchmarks/strategies_sim.py --from DIR

Root only for running (network namespaces); about 3-6 minutes per run on a loaded 2-core box.
``--runs 1`` is the short mode. --check exits 1 when fewer than 8 of 9 (scaled to --runs) runs have
all three strategies within +-25%.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_sim import run_on_sim  # the same directory: run as python benchmarks/strategies_sim.py

from ddpkit.bench.strategy_rows import link_for, strategy_row

BAND = (0.75, 1.25)
STRATEGIES = ("ddp", "fsdp", "hsdp")


def bench_argv(node: int, master: str, run_dir: Path) -> list[str]:
    return [sys.executable, "-m", "ddpkit", "bench", "--quick", "--json", "--collectives",
            "--strategies", ",".join(STRATEGIES), "--params", "8M", "--batch", "8", "--nnodes",
            "2", "--nproc-per-node", "2", "--node-rank", str(node), "--master-addr", master,
            "--master-port", "29500", "--run-dir", str(run_dir), "--env", "OMP_NUM_THREADS=1"]


def run_once(name: str, subnet: str, work: Path) -> float:
    """One bench on a fresh sim; its files stay in ``work``; the seconds it took."""
    out, codes, elapsed = run_on_sim(name, subnet, work, bench_argv, 900)
    (work / "bench.json").write_text(out)
    if codes != (0, 0):
        print(f"bench failed (node 0: exit {codes[0]}, node 1: exit {codes[1]}); logs in {work}",
              file=sys.stderr)
    return elapsed


def rows_of(work: Path) -> dict[str, dict[str, Any]] | None:
    """Plan's current prediction beside the measurements kept in ``work`` (None: the run failed)."""
    try:
        doc = json.loads((work / "bench.json").read_text())
        docs = {s: json.loads((work / "node0" / "results" / f"strategy-{s}.json").read_text())
                for s in STRATEGIES}
    except (OSError, ValueError):
        return None
    link = link_for(list(docs.values()), doc.get("inter_node"),
                    (doc.get("tcp") or {}).get("wire_bytes_per_s"), None)
    return {s: strategy_row(s, None, docs[s], link) for s in STRATEGIES}


def report(index: int, rows: dict[str, dict[str, Any]] | None) -> dict[str, float | None]:
    if rows is None:
        print(f"run {index}: FAILED (no bench.json or strategy documents)")
        return dict.fromkeys(STRATEGIES)
    ratios: dict[str, float | None] = {}
    for name, row in rows.items():
        got, plan = row.get("measured") or {}, row.get("predicted") or {}
        ratio = (row.get("ratio") or {}).get("step")
        ratios[name] = ratio
        if not row.get("ok") or ratio is None:
            print(f"run {index} {name}: FAILED {row.get('error', '')}")
            continue
        print(f"run {index} {name:<4}: 1-node {got['one_node_step_s']:.3f} s "
              f"({'/'.join(f'{s:.3f}' for s in got['one_node_steps_s'])}), 2-node "
              f"{got['step_s']:.3f} s; plan {plan['step_s']:.3f} s = compute "
              f"{plan['compute_s']:.3f} + comm {plan['comm_s']:.3f} (exposed "
              f"{plan['step_s'] - plan['compute_s']:.3f}); link bytes "
              f"{row['ratio']['link_bytes']:.2f} of plan's; measured/plan {ratio:.2f}")
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--keep", type=Path, default=None, help="keep every run's files here")
    parser.add_argument("--from", dest="source", type=Path, default=None,
                        help="recompute from runs kept under this directory; run nothing")
    parser.add_argument("--name", default="dkstr")
    parser.add_argument("--subnet", default="10.213.113.0/24")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    table: list[dict[str, float | None]] = []
    if args.source is not None:
        for index, work in enumerate(sorted(p for p in args.source.iterdir() if p.is_dir()), 1):
            table.append(report(index, rows_of(work)))
    else:
        root = args.keep or Path(tempfile.mkdtemp(prefix="ddpkit-strategies-sim-"))
        for index in range(1, args.runs + 1):
            work = root / f"run{index:02d}"
            work.mkdir(parents=True, exist_ok=True)
            elapsed = run_once(args.name, args.subnet, work)
            print(f"run {index}: {elapsed:.0f} s, files in {work}", flush=True)
            table.append(report(index, rows_of(work)))
    inside = sum(all(r is not None and BAND[0] <= r <= BAND[1] for r in ratios.values())
                 for ratios in table)
    for name in STRATEGIES:
        cells = " ".join("-" if r[name] is None else f"{r[name]:.2f}" for r in table)
        print(f"{name:<4} measured/plan: {cells}")
    print(f"runs with all three within +-25%: {inside} of {len(table)}")
    return 1 if args.check and inside * 9 < 8 * len(table) else 0


if __name__ == "__main__":
    raise SystemExit(main())
