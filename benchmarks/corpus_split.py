"""Assign the real-log corpus (tests/fixtures/real-logs/corpus.json) to a dev and an eval split.

The eval split is a seeded random third of the logs, chosen once, before any rule was written for
the corpus (issue 12), and committed with it. Rules are developed on the dev split only; the eval
figure is reported, never tuned. Re-running this script reproduces the same assignment for the
same set of files (sorted by name, then sampled with ``random.Random(seed)``).

Logs are added in batches (the ``batch`` field; absent means batch 1). Each batch gets its own
seeded third, so adding a batch never moves a log of an earlier batch between the splits. Batch 2
was gathered after the batch-1 rule changes, batch 3 after the batch-2 rule changes, batch 4 after
the batch-3 rule changes, batch 5 after the batch-4 rule changes, batch 6 after the batch-5 rules
(with no rule change for it), batches 7 and 8 (issue 24) after the batch-6 rules, with no rule
change for either, batches 9 and 10 (issue 24) after them too, with no rule change, batch 11 (issue 24)
after the rules of main at its gathering, with no rule change for it, batch 12 (issue 30) after
the facts/causes engine was built, batch 13 (issue 30) after the rule changes batch 12's dev
split showed (benchmarks/corpus_add_batch.py adds a batch and measures it in one step); each
batch's split was committed, with its untouched measurement, before any rule saw that batch.

    python benchmarks/corpus_split.py          # print the assignment
    python benchmarks/corpus_split.py --write  # store it in corpus.json
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

SEED = 20261203
BATCH_SEEDS = {1: SEED, 2: 20261204, 3: 20261205, 4: 20261206, 5: 20261207, 6: 20261208,
               7: 20261209, 8: 20261210, 9: 20261211,
               10: 20261212, 11: 20261213, 12: 20261214, 13: 20261215, 14: 20261216,
               15: 20261217, 16: 20261218, 17: 20261219,
               18: 20261220, 19: 20261221, 20: 20261222, 21: 20261223,
               22: 20261224, 23: 20261225, 24: 20261226,
               25: 20261227, 26: 20261228, 27: 20261229,
               28: 20261230, 29: 20261231, 30: 20270101, 31: 20270102,
               32: 20270103, 33: 20270104, 34: 20270105, 35: 20270106,
               36: 20270107, 37: 20270108, 38: 20270109,
               39: 20270110, 40: 20270111, 41: 20270112, 42: 20270113, 43: 20270114,
               44: 20270115,
               45: 20270116,
               46: 20270117,
               47: 20270118,
               48: 20270119,
               49: 20270120,
               50: 20270121}
EVAL_FRACTION = 1 / 3
CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "real-logs" / "corpus.json"
THREAD = re.compile(r"[\w.-]+/[\w.-]+#\d+")  # a GitHub thread as the corpus names it: owner/repo#N


def eval_files(files: list[str], seed: int = SEED) -> set[str]:
    """The files of the eval split: a seeded random third of ``files``."""
    ordered = sorted(files)
    count = round(len(ordered) * EVAL_FRACTION)
    return set(random.Random(seed).sample(ordered, count))


def eval_files_by_batch(entries: list[dict[str, object]]) -> set[str]:
    """The eval files of the whole corpus: each batch's own seeded third."""
    chosen: set[str] = set()
    for batch, seed in BATCH_SEEDS.items():
        files = [str(e["file"]) for e in entries if e.get("batch", 1) == batch]
        chosen |= eval_files(files, seed)
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="store the split in corpus.json")
    args = parser.parse_args()
    corpus = json.loads(CORPUS.read_text())
    unknown = {e.get("batch", 1) for e in corpus["logs"]} - set(BATCH_SEEDS)
    if unknown:
        parser.error(f"no seed recorded for batch(es) {sorted(unknown)}: add them to BATCH_SEEDS")
    chosen = eval_files_by_batch(corpus["logs"])
    for entry in corpus["logs"]:
        entry["split"] = "eval" if entry["file"] in chosen else "dev"
        print(f"{entry['split']:4}  batch {entry.get('batch', 1)}  {entry['file']}")
    corpus["split"] = {
        "seed": SEED,
        "batch_seeds": {str(batch): seed for batch, seed in BATCH_SEEDS.items()},
        "eval_fraction": "1/3 of each batch",
        "script": "benchmarks/corpus_split.py",
    }
    if args.write:
        CORPUS.write_text(json.dumps(corpus, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
