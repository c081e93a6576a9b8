"""`ddpkit doctor --log` on the stacks a hung job left (one node's or several nodes' together)."""

from __future__ import annotations

import json
from pathlib import Path

from test_launch_stacks import _job

from ddpkit.launch.hang.watcher import StackReport, write_stacks


def _dump(where: Path, stacks, node: int) -> Path:  # type: ignore[no-untyped-def]
    write_stacks(where, StackReport("hang", node, f"node{node}", tuple(stacks), headline="hung"))
    return where


def test_a_stacks_directory_is_a_job_hung_finding_naming_the_rank(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    job = _job()
    node1 = _dump(tmp_path / "run1" / "stacks", job[2:], 1)
    (tmp_path / "run0").mkdir()
    node0 = _dump(tmp_path / "run0" / "stacks", job[:2], 0)
    result = run_cli("doctor", "--log", str(node0), str(node1), "--json")
    assert result.code == 1, result.err
    [finding] = result.json()["findings"]
    assert finding["id"] == "job-hung" and "a rank is somewhere the others are not" in finding["title"]
    assert finding["explanation"].startswith("likely cause: rank 1 (node0, pid ")
    texts = [e["text"] for e in finding["evidence"]]
    assert texts[0] == "ranks 0, 2, 3 wait in all_reduce at hang.py:15 `dist.all_reduce(t)`"


def test_a_run_directory_with_stacks_puts_the_hang_first(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run = tmp_path / "run"
    _dump(run / "stacks", _job()[:2], 0)
    (run / "torchrun.log").write_text("nothing went wrong here\n")
    result = run_cli("doctor", "--log", str(run))
    assert result.code == 1
    assert result.out.splitlines()[0].split()[1] == "job-hung"
    doc = json.loads((run / "stacks" / "stacks.json").read_text())
    assert doc["schema"] == "ddpkit.stacks/1" and len(doc["stacks"]) == 2
