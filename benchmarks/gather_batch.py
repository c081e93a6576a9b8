"""Set up, and merge, a fresh batch of real logs gathered by helpers who write no rules (issue 30).

``prepare`` writes each gatherer's folder, ``<root>/batch<N><name>/``, with its INSTRUCTIONS.md
(benchmarks/gather_instructions.md filled in): its theme, the finding ids it may name (each with
its cause, from docs/errors.md), every thread already used (corpus.json's logs and the threads
its measurements left out, and those of other gatherers' folders of this batch) and the reserved
threads (corpus.json's ``reserved``), which it must never open. A gatherer is told to read only
its own folder; nothing of the engine, the corpus or the notes is in it.

``merge`` joins the gatherers' folders into ``<root>/batch<N>/`` for benchmarks/corpus_add_batch.py:
a thread given twice keeps its first entry (folders in the order named), a thread already in the
corpus or reserved is dropped, and each entry's ``cause_in_log_reason`` names its gatherer. It
prints counts and the dropped threads only, never a log's lines: the batch is measured untouched.

    python benchmarks/gather_batch.py prepare --batch N --themes THEMES.json [--root /work]
                                              [--lookups 80] [--prefix s16batch]
    python benchmarks/gather_batch.py merge --batch N --names a b c [--root /work]

THEMES.json maps each gatherer's one-letter name to its theme (a sentence or two: which projects,
which years; other than the classes of miss issue 30 describes).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

from corpus_split import CORPUS, THREAD

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = Path(__file__).resolve().parent / "gather_instructions.md"
# ids no gatherer records: what ddpkit answers when it cannot name a cause, and a dump's reading
_NOT_CAUSES = frozenset({"unexplained-failure", "no-result", "no-failure", "dump-unreadable"})


def finding_ids() -> list[str]:
    """``- `id`: cause`` for each finding a gatherer may name (docs/errors.md's findings)."""
    text = (ROOT / "docs" / "errors.md").read_text().split("## Doctor findings", 1)[1]
    found = []
    for block in re.split(r"\n#### ", text)[1:]:
        head = re.match(r"`([\w-]+)`", block)
        cause = re.search(r"\*\*Cause:\*\* (.*)", block)
        if head and head.group(1) not in _NOT_CAUSES:
            found.append(f"- `{head.group(1)}`: {cause.group(1).strip() if cause else ''}")
    return found


def threads(corpus: dict[str, list[dict[str, object]]]) -> tuple[set[str], set[str]]:
    """(threads already used, reserved threads) of the corpus."""
    used = {str(e["source"]) for e in corpus["logs"]}
    used |= set(THREAD.findall(json.dumps(corpus["measurements"])))
    reserved = set(THREAD.findall(json.dumps(corpus["reserved"])))
    return used - reserved, reserved


def prepare(args: argparse.Namespace) -> int:
    corpus = json.loads(CORPUS.read_text())
    used, reserved = threads(corpus)
    for entries in args.root.glob(f"batch{args.batch}[a-z]/entries.json"):
        used |= {str(e["source"]) for e in json.loads(entries.read_text())}
    themes: dict[str, str] = json.loads(args.themes.read_text())
    template = TEMPLATE.read_text()
    for name, theme in themes.items():
        folder = args.root / f"batch{args.batch}{name}"
        (folder / "logs").mkdir(parents=True, exist_ok=True)
        values = {"NAME": f"{args.prefix}{name}", "FOLDER": str(folder), "PROJECT": str(ROOT),
                  "ROOT": str(args.root), "THEME": theme, "LOOKUPS": str(args.lookups),
                  "IDS": "\n".join(finding_ids()),
                  "USED": " ".join(sorted(used, key=str.lower)),
                  "RESERVED": " ".join(sorted(reserved, key=str.lower))}
        text = template
        for key, value in values.items():
            text = text.replace("{" + key + "}", value)
        (folder / "INSTRUCTIONS.md").write_text(text)
        print(f"{folder}/INSTRUCTIONS.md: {len(used)} threads used, {len(reserved)} reserved")
    return 0


def merge(args: argparse.Namespace) -> int:
    corpus = json.loads(CORPUS.read_text())
    used, reserved = threads(corpus)
    known = {t.lower() for t in used}
    reserved_lower = {t.lower() for t in reserved}
    out_dir = args.root / f"batch{args.batch}"
    (out_dir / "logs").mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    kept: list[dict[str, object]] = []
    for name in args.names:
        folder = args.root / f"batch{args.batch}{name}"
        for entry in json.loads((folder / "entries.json").read_text()):
            source = str(entry["source"]).lower()
            log = folder / "logs" / str(entry["file"])
            why = ("a repeat within the batch" if source in seen else "already in the corpus"
                   if source in known else "reserved" if source in reserved_lower
                   else "no log file" if not log.is_file() else "")
            if why:
                print(f"dropped: {entry['source']} ({name}): {why}")
                continue
            seen.add(source)
            shutil.copyfile(log, out_dir / "logs" / str(entry["file"]))
            entry["cause_in_log_reason"] = (f"the gatherer ({args.prefix}{name}, who writes no "
                                            f"rules): {entry.get('cause_in_log_reason', '')}")
            kept.append(entry)
    (out_dir / "entries.json").write_text(json.dumps(kept, indent=1, ensure_ascii=False))
    named = sum(e["cause"] is not None for e in kept)
    benign = sum(e["cause"] == "no-failure" for e in kept)
    print(f"{out_dir}: {len(kept)} kept, {named} with a finding id ({benign} no-failure)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for command in ("prepare", "merge"):
        one = sub.add_parser(command)
        one.add_argument("--batch", type=int, required=True)
        one.add_argument("--root", type=Path, default=Path("/work"))
        one.add_argument("--prefix", default="gatherer-", help="the gatherers' names' start")
    sub.choices["prepare"].add_argument("--themes", type=Path, required=True)
    sub.choices["prepare"].add_argument("--lookups", type=int, default=80)
    sub.choices["merge"].add_argument("--names", nargs="+", required=True)
    args = parser.parse_args()
    return prepare(args) if args.command == "prepare" else merge(args)


if __name__ == "__main__":
    raise SystemExit(main())
