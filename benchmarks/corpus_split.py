"""Assign the real-log corpus (tests/fixtures/real-logs/corpus.json) to a dev and an eval split.

The eval split is a seeded random third of the logs, chosen once, before any rule was written for
the corpus (issue 12), and committed with it. Rules are developed on the dev split only; the eval
figure is reported, never tuned. Re-running this script reproduces the same assignment for the
same set of files (sorted by name, then sampled with ``random.Random(SEED)``).

    python benchmarks/corpus_split.py          # print the assignment
    python benchmarks/corpus_split.py --write  # store it in corpus.json
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

SEED = 20261203
EVAL_FRACTION = 1 / 3
CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "real-logs" / "corpus.json"


def eval_files(files: list[str], seed: int = SEED) -> set[str]:
    """The files of the eval split: a seeded random third of ``files``."""
    ordered = sorted(files)
    count = round(len(ordered) * EVAL_FRACTION)
    return set(random.Random(seed).sample(ordered, count))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="store the split in corpus.json")
    args = parser.parse_args()
    corpus = json.loads(CORPUS.read_text())
    chosen = eval_files([entry["file"] for entry in corpus["logs"]])
    for entry in corpus["logs"]:
        entry["split"] = "eval" if entry["file"] in chosen else "dev"
        print(f"{entry['split']:4}  {entry['file']}")
    corpus["split"] = {"seed": SEED, "eval_fraction": "1/3", "script": "benchmarks/corpus_split.py"}
    if args.write:
        CORPUS.write_text(json.dumps(corpus, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
