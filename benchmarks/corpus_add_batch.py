"""Add a fresh, untouched batch of real logs to the corpus and measure it before any rule sees it.

A gatherer who writes no rules (and never sees the engine) leaves a folder with ``entries.json``
(one object per log: source, url, versions, cause, confirmed, cause_in_log, visibly_failed, note,
file, cause_in_log_reason) and ``logs/``. This script, in one step:

1. refuses a log whose thread is already in the corpus or among its reserved threads, and leaves
   out (listed) a log whose cause no finding id names (``"cause": null``);
2. copies the logs into tests/fixtures/real-logs/ and the entries into corpus.json with the
   batch's number (the batch needs its seed in benchmarks/corpus_split.py's BATCH_SEEDS) and
   its seeded eval third;
3. runs the diagnosis on every new log, as it stands (no rule changed for them), marks each miss
   with ``known_miss`` (the real-log test's strict xfail) and appends the measurement to
   corpus.json's ``measurements``: the headline figures of issue 30 (top finding right on the
   failed runs whose lines show the cause; no-failure on a visibly failed log; an error finding
   on a benign log).

    python benchmarks/corpus_add_batch.py FOLDER [FOLDER...] --batch N --commit SHA --who TEXT
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "src"))

from corpus_split import BATCH_SEEDS, CORPUS, THREAD, eval_files  # noqa: E402
from doctor_corpus import top_finding  # noqa: E402


def headline(entries: list[dict[str, object]], got: dict[str, tuple[str, str]]) -> dict[str, str]:
    """Issue 30's three figures for ``entries`` given each file's (top id, severity)."""
    shown = [e for e in entries if e["cause_in_log"] and e["cause"] != "no-failure"]
    right = sum(got[str(e["file"])][0] == e.get("answer", e["cause"]) for e in shown)
    failed = [e for e in entries if e["visibly_failed"]]
    silent = sum(got[str(e["file"])][0] == "no-failure" for e in failed)
    benign = [e for e in entries if e["cause"] == "no-failure"]
    alarms = sum(got[str(e["file"])][1] == "error" for e in benign)
    share = f" ({100 * right / len(shown):.0f}%)" if shown else ""
    return {"failed runs whose lines show the cause: top finding right": f"{right}/{len(shown)}"
            + share,
            "no-failure on a visibly failed log": f"{silent}/{len(failed)}",
            "error finding on a benign log": f"{alarms}/{len(benign)}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--commit", required=True, help="the commit whose rules measure it")
    parser.add_argument("--who", required=True, help="who gathered it, and how")
    parser.add_argument("--dry-run", action="store_true", help="measure, write nothing")
    args = parser.parse_args()
    if args.batch not in BATCH_SEEDS:
        parser.error(f"no seed for batch {args.batch}: add it to corpus_split.BATCH_SEEDS first")
    corpus = json.loads(CORPUS.read_text())
    known = {str(e["source"]).lower() for e in corpus["logs"]}
    reserved = {t.lower() for t in THREAD.findall(json.dumps(corpus["reserved"]))}
    files = {str(e["file"]) for e in corpus["logs"]}
    new: list[dict[str, object]] = []
    left_out: list[str] = []
    for folder in args.folders:
        for entry in json.loads((folder / "entries.json").read_text()):
            source = str(entry["source"]).lower()
            if source in reserved:
                parser.error(f"{entry['source']} is a reserved thread: the batch cannot be used")
            if source in known or entry["file"] in files:
                parser.error(f"{entry['source']} ({entry['file']}) is already in the corpus")
            if entry["cause"] is None:
                left_out.append(f"{entry['source']}: no finding id names its cause")
                continue
            entry = {**entry, "categories": entry.get("categories", []), "batch": args.batch,
                     "_from": str(folder / "logs" / str(entry["file"]))}
            known.add(source)
            files.add(str(entry["file"]))
            new.append(entry)
    chosen = eval_files([str(e["file"]) for e in new], BATCH_SEEDS[args.batch])
    got = {}
    for entry in new:
        entry["split"] = "eval" if entry["file"] in chosen else "dev"
        got[str(entry["file"])] = top_finding(Path(str(entry["_from"])))
    untouched = f"batch {args.batch}, untouched (rules of commit {args.commit})"
    for entry in new:
        top, severity = got[str(entry["file"])]
        expected = entry.get("answer", entry["cause"])
        print(f"{'ok  ' if top == expected else 'MISS'} [{entry['split']}] {entry['file']}: "
              f"expected {expected}, got {top} ({severity})")
        if top != expected:
            entry["known_miss"] = f"{untouched}: {top}, not {expected}"
    figures = headline(new, got)
    dev = sum(got[str(e["file"])][0] == e.get("answer", e["cause"]) for e in new
              if e["split"] == "dev")
    evals = sum(got[str(e["file"])][0] == e.get("answer", e["cause"]) for e in new
                if e["split"] == "eval")
    n_dev = sum(e["split"] == "dev" for e in new)
    overall = f"{dev + evals}/{len(new)} (dev {dev}/{n_dev}, eval {evals}/{len(new) - n_dev})"
    for name, value in {"all": overall, **figures}.items():
        print(f"{name}: {value}")
    for line in left_out:
        print("left out: " + line)
    if args.dry_run:
        return 0
    for entry in new:
        shutil.copyfile(str(entry.pop("_from")), CORPUS.parent / str(entry["file"]))
    corpus["logs"].extend(new)
    corpus["split"]["batch_seeds"] = {str(b): s for b, s in BATCH_SEEDS.items()}
    corpus["measurements"].append({
        "when": f"batch {args.batch}, gathered by {args.who}; measured untouched on the rules of "
                f"commit {args.commit}, before any rule was changed for it"
                + (f"; left out: {'; '.join(left_out)}" if left_out else ""),
        "command": "python benchmarks/corpus_add_batch.py (then benchmarks/doctor_corpus.py)",
        f"batch {args.batch}, untouched": overall,
        **{f"batch {args.batch}, {name}": value for name, value in figures.items()},
        "misses": [str(e["known_miss"]).split(": ", 1)[-1] + f" ({e['file']})"
                   for e in new if "known_miss" in e]})
    CORPUS.write_text(json.dumps(corpus, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
