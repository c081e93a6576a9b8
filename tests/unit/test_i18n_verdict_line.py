"""`ddpkit test`'s last line as a translatable text: its English is the verdict's headline (what
--json calls ``summary``) in every case, and in Chinese its numbers stay numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ddpkit.cli.output.width import display_width
from ddpkit.clustertest import CHECK_ORDER, read_verdict
from ddpkit.i18n import localized


def verdict_line(verdict: Any) -> Any:
    return verdict.headline()


def _rank(rank: int, *, failing: str | None = None, nics: tuple[str, ...] = ("eth1",),
          bandwidth: bool = True) -> dict[str, Any]:
    checks = [{"name": n, "ok": n != failing, "detail": "boom" if n == failing else "fine"}
              for n in CHECK_ORDER]
    return {"rank": rank, "host": f"node{rank}", "checks": checks, "interfaces_used": list(nics),
            "bandwidth": [{"bytes": 1 << 20, "busbw_gbps": 0.5},
                          {"bytes": 4 << 20, "busbw_gbps": 0.66}] if bandwidth else []}


def _verdict(tmp_path: Path, ranks: list[dict[str, Any]], ok: bool, nodes: int | None = 2) -> Any:
    (tmp_path / "report.json").write_text(json.dumps({
        "world_size": len(ranks), "nodes": nodes, "ranks_per_node": 1, "ok": ok, "ranks": ranks}))
    return read_verdict(tmp_path)


CASES = {
    "passed": ([_rank(0), _rank(1)], True, 2),
    "loopback": ([_rank(0, nics=()), _rank(1, nics=())], True, 2),
    "no bandwidth": ([_rank(0, bandwidth=False), _rank(1, bandwidth=False)], True, 2),
    "nothing measured": ([_rank(0, nics=(), bandwidth=False)], True, 1),
    "no node count": ([_rank(0), _rank(1), _rank(2)], True, None),
    "failed": ([_rank(0), _rank(1, failing="ddp")], False, 2),
    "nothing reported": ([], False, 2),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_english_is_the_headline(tmp_path: Path, case: str) -> None:
    ranks, ok, nodes = CASES[case]
    verdict = _verdict(tmp_path, ranks, ok, nodes)
    assert localized(verdict_line(verdict)) == verdict.headline()


def test_the_readme_line_in_chinese_keeps_its_numbers(tmp_path: Path, chinese: None) -> None:
    verdict = _verdict(tmp_path, [_rank(0), _rank(1)], True)
    assert verdict.headline() == ("2 nodes × 1 rank: all checks passed · all_reduce busbw 0.66 "
                                  "GB/s at 4 MiB via eth1")
    shown = localized(verdict_line(verdict))
    assert shown != verdict.headline()
    assert any("\u4e00" <= char <= "\u9fff" for char in shown)
    for kept in ("2", "1", "all_reduce busbw 0.66 GB/s", "4 MiB", "eth1"):
        assert kept in shown
    assert display_width(shown) <= 80  # one line a user can quote, even in an 80-column terminal


def test_a_failure_in_chinese_names_the_rank_and_its_stage(tmp_path: Path, chinese: None) -> None:
    (tmp_path / "rank0.stage").write_text("init 1.0\n")
    verdict = read_verdict(tmp_path)
    shown = localized(verdict_line(verdict))
    assert "rank 0" in shown and "init" in shown and "FAILED" not in shown
