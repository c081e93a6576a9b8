"""Regenerate the message catalogue of ``ddpkit doctor --log`` from the sources (issue 24).

Reads the logging/check/raise calls of NCCL, Gloo and torch.distributed at each release out of
their git repositories (bare git dirs are fine: only ``git ls-tree``/``git cat-file`` are used),
and writes every warning/error/info message template with the source file, the first and last
release that prints it, for an NCCL WARN the ``ncclResult_t`` its code path returns (``result``:
see ``msgresult.py``), and what ddpkit makes of it (a finding id, benign, or unmapped with a
reason: see ``msgmap.py`` and its rule tables, ``msgrules.py`` and ``msgsource_rules.py``) into
``src/ddpkit/doctor/log/messages.json``, plus a coverage report per source file into
``docs/message-coverage.md``.

    python tools/torchwheels.py /work/cache/torch-wheels   # once: torch 1.8 .. 2.13 wheels
    tools/regenerate_catalogue.sh       # the shipped catalogue: all sources, with the notes
    python tools/catalogue_messages.py --nccl NCCL_GIT_DIR --gloo GLOO_GIT_DIR \\
        --torch-wheels /work/cache/torch-wheels [--torch TORCH_GIT_DIR_OR_TREE]

``--torch-wheels`` reads every torch release of which the directory holds a wheel (the last
patch release of each minor 1.8 .. 2.13, macOS builds: see ``torchwheels.py``), as zip files:
the Python sources of ``torch/distributed`` and the c10d headers, labelled ``vX.Y.Z``. No wheel
holds the c10d ``.cpp`` files: ``--torch-cpp DIR`` reads stored versions of them from a tree
``DIR/<commit>/<path>`` (see ``torchcpp.py``), each commit labelled by its version.txt, if any.
``--torch`` takes a pytorch git dir (every release tag v1.8.0 .. v2.13.0 is read) or, where the
repository is too large to have at hand, a plain directory tree laid out like the repository
(e.g. an installed wheel's site-packages, whose ``torch/include/`` headers count as
``torch/csrc``), read as the single release ``--torch-label``; several trees may be given as
``LABEL=DIR``. Gloo has no release tags: it is read at the last commit before each torch
release date (the Gloo a torch release of that time built against) and at its newest commit.
Nothing of those repositories is copied: the data file holds the message templates only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from ddpkit.atomic_file import replace_file  # a generated file is whole or not there

sys.path.insert(0, str(Path(__file__).resolve().parent))

import msgmap  # noqa: E402
import tool_exit  # noqa: E402
from msgsources import (  # noqa: E402
    GLOO_FILES,
    NCCL_FILES,
    TORCH_CORE_FILES,
    TORCH_FILES,
    TORCH_LAUNCH_FILES,
    TORCH_MORE_FILES,
    Git,
    Key,
    Record,
    gloo_revisions,
    nccl_revisions,
    read_git,
    read_repo,
    read_texts,
    read_torch,
    torch_cpp,
    torch_revisions,
    torch_tree,
    torch_wheels,
)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "ddpkit" / "doctor" / "log" / "messages.json"
REPORT = ROOT / "docs" / "message-coverage.md"
FORMAT_VERSION = 1



def build(args: argparse.Namespace) -> tuple[list[dict[str, object]], dict[str, list[str]]]:
    records: dict[Key, Record] = {}
    order: dict[str, list[str]] = {}
    if args.nccl:
        read_repo(records, order, "nccl", args.nccl, nccl_revisions, NCCL_FILES)
    if args.gloo:
        read_repo(records, order, "gloo", args.gloo, gloo_revisions, GLOO_FILES)
    if args.torch_wheels:
        read_torch(records, order, torch_wheels(args.torch_wheels))
    if args.torch_cpp:
        read_torch(records, order, torch_cpp(args.torch_cpp))
    for spec in args.torch or []:
        label, _, where = spec.rpartition("=")
        path = Path(where)
        if (path / "HEAD").exists() and (path / "objects").exists():
            read_repo(records, order, "torch", where, torch_revisions, TORCH_FILES)
        else:
            read_torch(records, order, [torch_tree(label or args.torch_label, path)])
    entries = [_entry(record, order[record.source])
               for record in sorted(records.values(), key=lambda r: (r.source, r.file, r.template))]
    return entries, order


def _entry(record: Record, releases: list[str]) -> dict[str, object]:
    """The data file's entry of one template: the releases it was seen in (first, last, how
    many, in the order of ``releases``) and what msgmap makes of it."""
    seen = sorted(record.releases, key=releases.index)
    mapping, reason = msgmap.classify(record.source, record.file, record.template, record.level,
                                      frozenset(record.results), record.call)
    return {
        "source": record.source, "file": record.file, "template": record.template,
        "level": record.level, "call": record.call, "first": seen[0], "last": seen[-1],
        "releases": len(seen), "maps": mapping, "reason": reason,
        **({"result": sorted(record.results)} if record.results else {}),
        "matcher": msgmap.matcher(record.template),
    }


def coverage(entries: list[dict[str, object]], order: dict[str, list[str]]) -> str:
    """The coverage report (markdown): per source and per source file."""
    def counts(items: list[dict[str, object]]) -> tuple[int, int, int, int, int]:
        kinds = Counter(msgmap.kind_of(str(e["maps"])) for e in items)
        return (len(items), kinds["finding"], kinds["generic"], kinds["benign"],
                kinds["unmapped"])

    def row(name: str, items: list[dict[str, object]]) -> str:
        total, mapped, generic, benign, unmapped = counts(items)
        share = 100.0 * (mapped + generic + benign) / total if total else 100.0
        specific = 100.0 * (mapped + benign) / total if total else 100.0
        return (f"| {name} | {total} | {mapped} | {generic} | {benign} | {unmapped} | "
                f"{share:.1f}% | {specific:.1f}% |")

    lines = [
        "# Message catalogue coverage",
        "",
        "Generated by `tools/catalogue_messages.py` (do not edit): every message template the",
        "sources print, and what `ddpkit doctor --log` makes of it. *finding*: a specific finding",
        "id; *generic*: `unexplained-failure` (a failure is reported and the next step given,",
        "the cause is not named); *benign*: informational; *unmapped*: left out, with a reason",
        "in `src/ddpkit/doctor/log/messages.json`. Covered = finding + generic + benign; the last",
        "column leaves the generic ones out.",
        "",
        "Releases read:",
        "",
    ]
    for source, releases in sorted(order.items()):
        lines.append(f"- {source}: {len(releases)} ({releases[0]} .. {releases[-1]})")
    header = ["", "| file | templates | finding | generic | benign | unmapped | covered "
                  "| finding or benign |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    lines += ["", "## By source", *header[1:]]
    for source in sorted(order):
        lines.append(row(source, [e for e in entries if e["source"] == source]))
    lines.append(row("all", entries))
    for source in sorted(order):
        lines += ["", f"## {source}", *header[1:]]
        files = sorted({str(e["file"]) for e in entries if e["source"] == source})
        for name in files:
            lines.append(row(f"`{name}`", [e for e in entries
                                           if e["source"] == source and e["file"] == name]))
    unmapped = Counter(str(e["reason"]) for e in entries if e["maps"] == "unmapped")
    if unmapped:
        lines += ["", "## Unmapped, by reason", ""]
        lines += [f"- {n}: {reason}" for reason, n in unmapped.most_common()]
    return "\n".join(lines) + "\n"


def remapped(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (a data file) with every template mapped, and matched, by msgmap as it
    stands."""
    messages = []
    for message in document["messages"]:
        mapping, reason = msgmap.classify(message["source"], message["file"],
                                          message["template"], message["level"],
                                          frozenset(message.get("result", ())),
                                          message.get("call", ""))
        messages.append({**message, "maps": mapping, "reason": reason,
                         "matcher": msgmap.matcher(message["template"])})
    return {**document, "messages": messages}


def added(document: dict[str, Any], spec: str) -> dict[str, Any]:
    """``document`` with the templates ``spec`` (``NAME=GITDIR@REV[,REV...]:FILES``) names: one
    program's files at one revision or at several (oldest first), in place of that program's
    earlier templates."""
    name, _, rest = spec.partition("=")
    where, _, files = rest.partition(":")
    git_dir, _, revs = where.rpartition("@")
    labels = revs.split(",")
    records: dict[Key, Record] = {}
    git = Git(git_dir)
    read_git(records, name, git, [(rev, rev) for rev in labels], re.compile(files))
    git.close()
    kept = [m for m in document["messages"] if m["source"] != name]
    new = [_entry(record, labels)
           for record in sorted(records.values(), key=lambda r: (r.file, r.template))]
    messages = sorted(kept + new, key=lambda m: (m["source"], m["file"], m["template"]))
    at = labels[0] if len(labels) == 1 else f"{len(labels)} releases {labels[0]} .. {labels[-1]}"
    note = f"{name}: the files matching {files} at {at}"
    notes = [n for n in document["notes"] if not n.startswith(f"{name}: ")] + [note]
    return {**document, "releases": {**document["releases"], name: labels}, "notes": notes,
            "messages": messages}


def added_nccl(document: dict[str, Any], git_dir: str) -> dict[str, Any]:
    """``document`` with NCCL's templates read anew: ``NCCL_FILES`` at every release tag
    (``nccl_revisions``), as a full reading has them, in place of NCCL's earlier ones."""
    git = Git(git_dir)
    labels = [label for label, _ in nccl_revisions(git)]
    git.close()
    return added(document, f"nccl={git_dir}@{','.join(labels)}:{NCCL_FILES.pattern}")


def added_torch_files(document: dict[str, Any], directory: Path, files: re.Pattern[str],
                      what: str) -> dict[str, Any]:
    """``document`` with the templates of the torch files ``files`` matches read from every
    torch wheel in ``directory``, in place of those files' earlier templates (the rest of
    torch's stay); ``what`` names them in the data file's note."""
    records: dict[Key, Record] = {}
    labels: list[str] = []
    for label, where, texts in torch_wheels(directory):
        labels.append(label)
        read_texts(records, "torch", label, texts, files)
        print(f"  torch {label} ({where}): {len(records)} templates so far", file=sys.stderr)
    kept = [m for m in document["messages"]
            if not (m["source"] == "torch" and files.search(m["file"]))]
    new = [_entry(record, labels)
           for record in sorted(records.values(), key=lambda r: (r.file, r.template))]
    messages = sorted(kept + new, key=lambda m: (m["source"], m["file"], m["template"]))
    head = f"torch: {files.pattern.removeprefix('^').removesuffix('$')} "
    note = (f"{head}({what}) read from the wheels of {labels[0]} .. {labels[-1]}"
            if labels else "")
    notes = [n for n in document["notes"] if not n.startswith(head)]
    return {**document, "notes": notes + ([note] if note else []), "messages": messages}


def dump(document: dict[str, object]) -> str:
    """The data file: one message a line (diffs between regenerations stay readable)."""
    head = {k: v for k, v in document.items() if k != "messages"}
    lines = [json.dumps(m, sort_keys=True, separators=(",", ":"))
             for m in document["messages"]]  # type: ignore[attr-defined]
    body = json.dumps(head, sort_keys=True, indent=1)[:-2]
    return body + ',\n "messages": [\n' + ",\n".join(lines) + "\n]}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nccl", help="git dir of NVIDIA/nccl")
    parser.add_argument("--gloo", help="git dir of facebookincubator/gloo")
    parser.add_argument("--torch", action="append",
                        help="git dir of pytorch/pytorch, or [LABEL=]DIR of a source tree")
    parser.add_argument("--torch-wheels", type=Path,
                        help="a directory of torch wheels, one release each (torchwheels.py)")
    parser.add_argument("--torch-cpp", type=Path,
                        help="a tree COMMIT/PATH of stored c10d .cpp files (torchcpp.py)")
    parser.add_argument("--torch-label", default="v2.13.0",
                        help="the release a plain --torch tree is (default v2.13.0)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--note", action="append", default=[],
                        help="a line recorded in the data file (how the sources were read)")
    parser.add_argument("--remap", type=Path, metavar="CATALOGUE",
                        help="read no sources: map the templates of an existing data file anew "
                             "(after a change to msgmap.py or its rule tables), keeping its releases "
                             "and notes")
    parser.add_argument("--add", action="append", default=[], metavar="NAME=GITDIR@REV:FILES",
                        help="with --remap: the templates of another program's files (a regex "
                             "of paths) at one revision of its git dir, replacing that "
                             "program's earlier ones")
    parser.add_argument("--add-nccl", metavar="GITDIR",
                        help="with --remap: NCCL's templates read anew from its git dir (every "
                             "release tag, NCCL_FILES), in place of its earlier ones")
    parser.add_argument("--add-torch-wheels", type=Path, metavar="DIR",
                        help="with --remap: the templates of torch's own Python outside "
                             "torch/distributed (DDP, SyncBatchNorm, DistributedSampler, "
                             "torch.cuda, torch.multiprocessing.spawn) from every wheel in DIR")
    parser.add_argument("--add-torch-launch", type=Path, metavar="DIR",
                        help="with --remap: the templates of torch's launch and process-group "
                             "Python (run.py, launch.py, distributed_c10d.py, rendezvous.py, "
                             "the launcher and torchelastic) from every wheel in DIR, in place "
                             "of those files' earlier ones (their C++ stays)")
    parser.add_argument("--add-torch-distributed", type=Path, metavar="DIR",
                        help="with --remap: the templates of the rest of torch.distributed's "
                             "Python (FSDP, DTensor, checkpointing, RPC, pipelining, ...: "
                             "TORCH_MORE_FILES) from every wheel in DIR")
    args = parser.parse_args()
    if args.remap:
        document = remapped(json.loads(args.remap.read_text()))
        for spec in args.add:
            document = added(document, spec)
        if args.add_nccl:
            document = added_nccl(document, args.add_nccl)
        if args.add_torch_wheels:
            document = added_torch_files(document, args.add_torch_wheels, TORCH_CORE_FILES,
                                         "torch's own Python outside torch/distributed")
        if args.add_torch_launch:
            document = added_torch_files(document, args.add_torch_launch, TORCH_LAUNCH_FILES,
                                         "torch's launch and process-group Python")
        if args.add_torch_distributed:
            document = added_torch_files(document, args.add_torch_distributed, TORCH_MORE_FILES,
                                         "the rest of torch.distributed's Python: FSDP, DTensor, "
                                         "checkpointing, RPC, pipelining, optimizers, hooks")
        entries, order = document["messages"], document["releases"]
    else:
        entries, order = build(args)
        document = {"format": FORMAT_VERSION, "releases": order, "notes": args.note,
                    "messages": entries}
    replace_file(args.out, dump(document))
    replace_file(args.report, coverage(entries, order))
    print(f"{len(entries)} templates -> {args.out}; coverage -> {args.report}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(tool_exit.run(main, "catalogue_messages"))
