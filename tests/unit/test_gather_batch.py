"""benchmarks/gather_batch.py: a gatherer's instructions name its theme, the ids it may record, and
every thread it must not use or open; a merge keeps a thread once and drops the corpus's own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gather_batch.py"
CORPUS = json.loads((ROOT / "tests" / "fixtures" / "real-logs" / "corpus.json").read_text())


def run(*args: str) -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout


def test_prepare_writes_each_gatherer_s_instructions(tmp_path: Path) -> None:
    themes = tmp_path / "themes.json"
    themes.write_text(json.dumps({"a": "speech recognition toolkits, 2021-2024"}))
    run("prepare", "--batch", "99", "--themes", str(themes), "--root", str(tmp_path),
        "--lookups", "70")
    text = (tmp_path / "batch99a" / "INSTRUCTIONS.md").read_text()
    assert "speech recognition toolkits, 2021-2024" in text and "**70 look-ups**" in text
    assert "- `port-in-use`:" in text and "- `no-result`:" not in text
    assert CORPUS["logs"][0]["source"] in text  # a thread already used
    assert "pytorch/torchtitan#423" in text  # a reserved one
    assert "{" + "USED}" not in text and (tmp_path / "batch99a" / "logs").is_dir()


def test_merge_keeps_a_thread_once_and_drops_the_corpus_s(tmp_path: Path) -> None:
    known = CORPUS["logs"][0]["source"]
    for name, sources in (("a", ["x/y#1", known]), ("b", ["x/y#1", "x/z#2"])):
        folder = tmp_path / f"batch99{name}"
        (folder / "logs").mkdir(parents=True)
        entries = []
        for n, source in enumerate(sources):
            file = f"{name}_{n}.log"
            (folder / "logs" / file).write_text("line\n")
            entries.append({"source": source, "file": file, "cause": "port-in-use",
                            "cause_in_log_reason": "shown"})
        (folder / "entries.json").write_text(json.dumps(entries))
    out = run("merge", "--batch", "99", "--names", "a", "b", "--root", str(tmp_path),
              "--prefix", "g")
    merged = json.loads((tmp_path / "batch99" / "entries.json").read_text())
    assert [e["source"] for e in merged] == ["x/y#1", "x/z#2"]
    assert merged[0]["cause_in_log_reason"].startswith("the gatherer (ga, who writes no rules)")
    assert "already in the corpus" in out and "a repeat within the batch" in out
    assert sorted(p.name for p in (tmp_path / "batch99" / "logs").iterdir()) == ["a_0.log",
                                                                                  "b_1.log"]
