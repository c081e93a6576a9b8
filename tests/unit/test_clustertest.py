"""Reading `ddpkit test` reports into a verdict: complete, failing, and hung jobs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ddpkit.clustertest import CHECK_ORDER, default_job_timeout, read_verdict, worker_args


def _rank(rank: int, host: str, *, failing: str | None = None) -> dict[str, Any]:
    checks = [{"name": n, "ok": n != failing, "detail": "boom" if n == failing else f"{n} fine"}
              for n in CHECK_ORDER]
    return {"rank": rank, "host": host, "checks": checks, "interfaces_used": ["eth1"],
            "bandwidth": [{"bytes": 1 << 20, "busbw_gbps": 0.5}, {"bytes": 4 << 20, "busbw_gbps": 0.75}]}


def _write(d: Path, ranks: list[dict[str, Any]], ok: bool, world: int | None = None) -> None:
    (d / "report.json").write_text(json.dumps({
        "world_size": world or len(ranks), "nodes": 2, "ranks_per_node": 1, "ok": ok, "ranks": ranks}))


def test_complete_passing_report(tmp_path: Path) -> None:
    _write(tmp_path, [_rank(1, "node1"), _rank(0, "node0")], ok=True)
    verdict = read_verdict(tmp_path)
    assert verdict.ok and verdict.complete
    assert [r["rank"] for r in verdict.ranks] == [0, 1]
    assert verdict.headline() == ("2 nodes × 1 rank: all checks passed · all_reduce busbw 0.75 GB/s "
                                  "at 4 MiB via eth1")
    headers, rows = verdict.rows()
    assert headers == ["check", "r0@node0", "r1@node1", "detail"]
    assert [row[0] for row in rows] == list(CHECK_ORDER)
    assert all(row[1:3] == ["ok", "ok"] for row in rows)


def test_failing_check_is_named_with_its_rank(tmp_path: Path) -> None:
    _write(tmp_path, [_rank(0, "node0"), _rank(1, "node1", failing="ddp")], ok=False)
    verdict = read_verdict(tmp_path)
    assert not verdict.ok
    assert "rank 1 (node1): ddp failed: boom" in verdict.headline()
    ddp_row = next(row for row in verdict.rows()[1] if row[0] == "ddp")
    assert ddp_row == ["ddp", "ok", "FAIL", "rank 1: boom"]


def test_missing_rank_in_a_complete_report_fails(tmp_path: Path) -> None:
    _write(tmp_path, [_rank(0, "node0")], ok=True, world=2)
    verdict = read_verdict(tmp_path)
    assert not verdict.ok and verdict.missing_ranks == (1,)


def test_hung_job_names_the_stuck_ranks_from_their_stage_files(tmp_path: Path) -> None:
    (tmp_path / "rank0.json").write_text(json.dumps(_rank(0, "node0")))
    (tmp_path / "rank0.stage").write_text("done 1.0\n")
    (tmp_path / "rank1.stage").write_text("init 1.0\n")
    verdict = read_verdict(tmp_path)
    assert not verdict.ok and not verdict.complete
    assert "rank 1 stuck in init" in verdict.headline()
    assert "rank 0 stuck" not in verdict.headline()


def test_corrupt_report_is_treated_as_absent(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text("{not json")
    verdict = read_verdict(tmp_path)
    assert not verdict.ok and not verdict.complete and verdict.ranks == ()


def test_worker_arguments_and_deadline() -> None:
    args = worker_args(Path("/r"), backend="gloo", quick=True, pg_timeout=40)
    assert args[:4] == ["--report-dir", "/r", "--backend", "gloo"]
    assert "--timeout" in args and args[args.index("--timeout") + 1] == "40"
    assert default_job_timeout(40) > 2 * 40


def test_sixteen_ranks_keep_failing_ranks_and_summarise_the_rest(tmp_path: Path) -> None:
    ranks = [_rank(r, f"node{r}", failing="ddp" if r in (5, 11) else None) for r in range(16)]
    _write(tmp_path, ranks, ok=False)
    headers, rows = read_verdict(tmp_path).rows()
    assert headers == ["check", "r5@node5", "r11@node11", "14 other ranks", "detail"]
    ddp = next(row for row in rows if row[0] == "ddp")
    assert ddp == ["ddp", "FAIL", "FAIL", "ok", "rank 5: boom"]
    assert all(row[3] == "ok" for row in rows)


def test_sixteen_healthy_ranks_are_one_summary_column(tmp_path: Path) -> None:
    ranks = [_rank(r, f"node{r}") for r in range(16)]
    del ranks[3]["checks"][0]  # one rank never reported its first check
    _write(tmp_path, ranks, ok=False)
    headers, rows = read_verdict(tmp_path).rows()
    assert headers == ["check", "r3@node3", "15 other ranks", "detail"]
    first = rows[0]
    assert first[1] == "-" and first[2] == "ok"


def test_eight_ranks_still_get_a_column_each(tmp_path: Path) -> None:
    _write(tmp_path, [_rank(r, f"n{r}") for r in range(8)], ok=True)
    headers, _ = read_verdict(tmp_path).rows()
    assert headers == ["check", *[f"r{r}@n{r}" for r in range(8)], "detail"]
