"""Accuracy of `ddpkit doctor --log` on the real-log corpus (tests/fixtures/real-logs/, issue 12).

For every log in corpus.json the top finding of ``ddpkit.doctor.log.diagnose.diagnose`` is compared with
the cause the log's thread confirmed. Prints the accuracy on the dev split (rules are developed on
it) and on the eval split (set aside before any rule change, never tuned on), the confusion list of
misses (expected -> got), and the false alarms: no-failure logs that got an error (a no-result warning
on a benign log whose lines stop before the run's end is counted apart; an entry's ``answer`` is
what its lines call for when that differs from its thread's cause, issue 24).
Issue 24's figures, printed too: the share of logs whose own lines show the confirmed cause and
the accuracy on those (``cause_in_log``, recorded from batch 7 on), and how many logs of a failed
run got ``no-failure`` (every log whose cause is not no-failure; and those marked
``visibly_failed``: an error line, traceback, errno, non-zero exit, signal, watchdog or retry loop
in the log itself).

    python benchmarks/doctor_corpus.py [--quick] [--split dev|eval|all] [--verbose]

The corpus is small, so --quick changes nothing but is accepted like the other benchmarks'.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIR = ROOT / "tests" / "fixtures" / "real-logs"
sys.path.insert(0, str(ROOT / "src"))

from ddpkit.doctor.log.diagnose import diagnose  # noqa: E402


def top_finding(path: Path) -> tuple[str, str]:
    """(id, severity) of the most likely cause doctor names for the log at ``path``."""
    findings = diagnose([str(path)])
    return (findings[0].id, findings[0].severity) if findings else ("(none)", "info")


FRESH_BATCH_LOGS = 30  # issue 30: a fresh batch is at least this many logs


def untouched_headline(measurements: list[dict[str, object]]) -> list[str]:
    """The figure that counts (issue 30): the newest fresh batch of at least
    ``FRESH_BATCH_LOGS`` logs as it was measured untouched, before any rule saw it (recorded in
    corpus.json by benchmarks/corpus_add_batch.py); any newer, smaller batch follows it."""
    lines: list[str] = []
    pooled: dict[str, list[int]] = {}  # the newer, smaller batches' figures, summed
    batches: list[str] = []
    for record in reversed(measurements):
        figures = {k: v for k, v in record.items() if k.startswith("batch ") and ", " in k
                   and k.split(", ", 1)[0].split()[-1].isdigit()}
        if not any("top finding right" in k for k in figures):
            continue
        total = next((int(str(v).split(" ", 1)[0].split("/")[1]) for k, v in figures.items()
                      if k.endswith(", untouched")), 0)
        shown = [f"  {k}: {v}" for k, v in figures.items()]
        if total >= FRESH_BATCH_LOGS:
            return ["headline, the newest fresh batch measured untouched "
                    f"({str(record['when'])[:60]}...):", *shown, *lines,
                    *_pooled(batches, pooled)]
        lines += [f"newer, smaller than a fresh batch ({total} logs < {FRESH_BATCH_LOGS}), also "
                  "untouched:", *shown]
        for key, value in figures.items():
            right, of = (int(n) for n in str(value).split(" ", 1)[0].split("/"))
            summed = pooled.setdefault(key.split(", ", 1)[1], [0, 0])
            summed[0], summed[1] = summed[0] + right, summed[1] + of
        batches.append(next(iter(figures)).split(", ", 1)[0].split()[-1])
    return [*lines, *_pooled(batches, pooled)]


def _pooled(batches: list[str], pooled: dict[str, list[int]]) -> list[str]:
    """The newer, smaller batches together: no one of them is a fresh batch, and each was
    measured untouched on the rules of its own day (not one set of rules)."""
    if len(batches) < 2:
        return []
    shown = [f"  {key}: {right}/{of}" + (f" ({100 * right // of}%)" if "right" in key and of
                                         else "") for key, (right, of) in pooled.items()]
    return [f"the newer batches pooled ({', '.join(sorted(batches, key=int))}; each untouched "
            "on the rules of its day):", *shown]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="accepted; the corpus is small")
    parser.add_argument("--split", choices=("dev", "eval", "all"), default="all")
    parser.add_argument("--verbose", action="store_true", help="print every log's result")
    args = parser.parse_args()
    corpus = json.loads((CORPUS_DIR / "corpus.json").read_text())
    started = time.perf_counter()
    totals: dict[str, list[int]] = {"dev": [0, 0], "eval": [0, 0]}
    by_category: dict[str, list[int]] = {}
    by_batch: dict[int, list[int]] = {}
    misses: list[str] = []
    false_alarms: list[str] = []  # an error finding on a benign log
    unfinished: list[str] = []  # a benign log whose lines stop before the run's end
    shown: dict[str, list[int]] = {"dev": [0, 0], "eval": [0, 0]}
    recorded = 0
    silent_on_failure: list[str] = []
    visibly_failed = [0, 0]
    for entry in corpus["logs"]:
        split = entry["split"]
        if args.split != "all" and split != args.split:
            continue
        got, severity = top_finding(CORPUS_DIR / entry["file"])
        expected = entry.get("answer", entry["cause"])  # answer: what the lines call for
        hit = got == expected
        totals[split][0] += hit
        totals[split][1] += 1
        batch_counts = by_batch.setdefault(entry.get("batch", 1), [0, 0])
        batch_counts[0] += hit
        batch_counts[1] += 1
        for category in entry["categories"]:
            counts = by_category.setdefault(category, [0, 0])
            counts[0] += hit
            counts[1] += 1
        where = f"[{split}, batch {entry.get('batch', 1)}] {entry['file']}"
        line = f"{where}: expected {expected}, got {got} ({severity})"
        if args.verbose:
            print(("ok    " if hit else "MISS  ") + line)
        if not hit:
            misses.append(line)
        if entry["cause"] == "no-failure" and severity == "error":
            false_alarms.append(line)
        if entry["cause"] == "no-failure" and got == "no-result":
            unfinished.append(line)
        if "cause_in_log" in entry:
            recorded += 1
            if entry["cause_in_log"]:
                shown[split][0] += hit
                shown[split][1] += 1
        if entry["cause"] != "no-failure" and got == "no-failure":
            silent_on_failure.append(line)
        if entry.get("visibly_failed"):
            visibly_failed[0] += got == "no-failure"
            visibly_failed[1] += 1
    elapsed = time.perf_counter() - started
    for line in untouched_headline(corpus["measurements"]):
        print(line)
    for split, (hits, count) in totals.items():
        if count:
            print(f"{split:5} accuracy: {hits}/{count} = {100 * hits / count:.0f}%")
    print("by batch (both splits; each batch was gathered after the previous batch's rule changes): "
          + ", ".join(f"{batch}: {hits}/{count}" for batch, (hits, count) in sorted(by_batch.items())))
    print("by category (both splits): " + ", ".join(
        f"{name} {hits}/{count}" for name, (hits, count) in sorted(by_category.items())))
    print(f"misses ({len(misses)}):")
    for line in misses:
        print("  " + line)
    print(f"false alarms (an error finding) on no-failure logs: {len(false_alarms)}")
    for line in false_alarms:
        print("  " + line)
    print(f"no-result (warning) on no-failure logs whose lines stop before the run's end: "
          f"{len(unfinished)}")
    shown_total = shown["dev"][1] + shown["eval"][1]
    print(f"logs whose lines show the cause: {shown_total}/{recorded} of those with cause_in_log; "
          "top finding right on them: " + ", ".join(
              f"{split} {hits}/{count}" for split, (hits, count) in shown.items() if count))
    print(f"no-failure on a failed run's log: {len(silent_on_failure)}"
          f" (on visibly failed logs: {visibly_failed[0]}/{visibly_failed[1]})")
    for line in silent_on_failure:
        print("  " + line)
    print(f"({elapsed:.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
