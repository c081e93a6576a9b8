"""`ddpkit test` says what its ranks are doing while they run (issue 21): the check each rank is
at, read from the stage files the worker keeps (ddpkit.clustertest.progress_line)."""

from __future__ import annotations

import ast
from pathlib import Path

from ddpkit import clustertest

WORKER = Path(clustertest.__file__).parent / "workers" / "ddp_test.py"


def test_the_check_order_is_the_workers_own() -> None:
    """CHECK_ORDER is what the worker runs, in its order: read from its source, not restated."""
    tree = ast.parse(WORKER.read_text(encoding="utf-8"))
    checks = [node.args[0].value for node in ast.walk(tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "check" and node.args
              and isinstance(node.args[0], ast.Constant)]
    checks.sort(key=lambda name: next(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
                                      and isinstance(n.func, ast.Attribute)
                                      and n.func.attr == "check" and n.args
                                      and getattr(n.args[0], "value", None) == name))
    assert tuple(checks) == clustertest.CHECK_ORDER


def test_the_line_names_each_check_in_progress_with_its_ranks(tmp_path: Path) -> None:
    assert "starting" in clustertest.progress_line(tmp_path, 4.2)
    (tmp_path / "rank0.stage").write_text("broadcast 1.0\n")
    (tmp_path / "rank1.stage").write_text("broadcast 1.0\n")
    (tmp_path / "rank3.stage").write_text("all_reduce 1.0\n")
    (tmp_path / "rank2.stage").write_text("exchange 1.0\n")
    line = clustertest.progress_line(tmp_path, 15.4)
    assert line == ("testing: rank 3 at check 2 of 8, all_reduce; ranks 0, 1 at check 4 of 8, "
                    "broadcast; rank 2: checks done, gathering every rank's report on node 0; "
                    "15 s so far")


def test_the_line_is_translated_part_by_part(tmp_path: Path, chinese: None) -> None:
    (tmp_path / "rank0.stage").write_text("ddp 1.0\n")
    shown = clustertest.progress_line(tmp_path, 9.0).localized()
    assert "ddp" in shown and "9" in shown
    assert any("\u4e00" <= char <= "\u9fff" for char in shown), shown
