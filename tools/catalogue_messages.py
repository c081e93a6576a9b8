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
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpkit.atomic_file import replace_file  # a generated file is whole or not there

sys.path.insert(0, str(Path(__file__).resolve().parent))

import msgextract  # noqa: E402
import msgmap  # noqa: E402
import msgresult  # noqa: E402
import tool_exit  # noqa: E402
import torchcpp  # noqa: E402
import torchwheels  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "ddpkit" / "doctor" / "log" / "messages.json"
REPORT = ROOT / "docs" / "message-coverage.md"
FORMAT_VERSION = 1

NCCL_FILES = re.compile(
    r"^src/(?:bootstrap|init|proxy|transport|net)\.(?:cc|cu)$"
    r"|^src/transport/(?:net|net_socket|net_ib|shm|p2p|coll_net)\.(?:cc|cu)$"
    r"|^src/transport/net_ib/[^/]+\.(?:cc|h)$"
    r"|^src/misc/(?:socket|shmutils|ibvwrap|ibvsymbols)\.(?:cc|cu)$"
    r"|^src/include/(?:socket|shm|shmutils|checks|net)\.h$")
GLOO_FILES = re.compile(r"^gloo/(?:transport/tcp/(?!tls/)[^/]+|rendezvous/(?!redis)[^/]+|common/linux)"
                        r"\.(?:cc|h)$")
TORCH_FILES = re.compile(
    r"^torch/(?:csrc/distributed/c10d|lib/c10d)/(?:socket|TCPStore\w*|FileStore|ProcessGroupGloo"
    r"|ProcessGroupNCCL|NCCLUtils|Utils|GlooDeviceFactory|Backoff|ProcessGroupWrapper)"
    r"\.(?:cpp|hpp|h)$"
    r"|^torch/distributed/(?:run|launch|distributed_c10d|rendezvous)\.py$"
    r"|^torch/distributed/launcher/[^/]+\.py$"
    r"|^torch/distributed/elastic/(?:agent/server|rendezvous|multiprocessing|utils)/"
    r"(?:[^/]+/)*[^/]+\.py$"
    rf"|^{torchwheels.CORE}$")
# torch's own Python outside torch.distributed (torchwheels.CORE), which --add-torch-wheels adds
TORCH_CORE_FILES = re.compile(rf"^{torchwheels.CORE}$")
# the rest of torch.distributed's Python, which --add-torch-distributed adds: the APIs a training
# script calls (FSDP, DTensor and the device mesh, checkpointing, RPC, pipelining, the
# optimizers and comm hooks, functional collectives), beside the launch and the process group
TORCH_MORE_FILES = re.compile(
    r"^torch/distributed/(?!(?:run|launch|distributed_c10d|rendezvous)\.py$|launcher/"
    r"|elastic/(?:agent/server|rendezvous|multiprocessing|utils)/)(?:[^/]+/)*[^/]+\.py$")
# torch release dates (the .0 releases): which Gloo each one built against, roughly.
TORCH_DATES = {
    "v1.8.0": "2021-03-04", "v1.9.0": "2021-06-15", "v1.10.0": "2021-10-21",
    "v1.11.0": "2022-03-10", "v1.12.0": "2022-06-28", "v1.13.0": "2022-10-28",
    "v2.0.0": "2023-03-15", "v2.1.0": "2023-10-04", "v2.2.0": "2024-01-30",
    "v2.3.0": "2024-04-24", "v2.4.0": "2024-07-24", "v2.5.0": "2024-10-17",
    "v2.6.0": "2025-01-29", "v2.7.0": "2025-04-23",
}


def _version_key(label: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", label)) or (0,)


class Git:
    """Read-only access to one git dir through a long-lived ``git cat-file --batch``."""

    def __init__(self, git_dir: str) -> None:
        self.git_dir = git_dir
        self.proc = subprocess.Popen(["git", "--git-dir", git_dir, "cat-file", "--batch"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def run(self, *args: str) -> str:
        return subprocess.run(["git", "--git-dir", self.git_dir, *args], check=True,
                              capture_output=True, text=True).stdout

    def tags(self) -> list[str]:
        return self.run("tag").split()

    def tree(self, rev: str) -> list[tuple[str, str]]:
        """(path, blob id) of every file at ``rev``."""
        out = []
        for line in self.run("ls-tree", "-r", rev).splitlines():
            meta, path = line.split("\t", 1)
            out.append((path, meta.split()[2]))
        return out

    def blob(self, sha: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(sha.encode() + b"\n")
        self.proc.stdin.flush()
        header = self.proc.stdout.readline().split()
        size = int(header[2])
        data = self.proc.stdout.read(size + 1)[:size]
        return data.decode("utf-8", "replace")

    def commit_before(self, date: str) -> str:
        return self.run("rev-list", "-1", f"--before={date}", "HEAD").strip()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait()


@dataclass
class Record:
    source: str
    file: str
    template: str
    level: str
    call: str
    releases: list[str] = field(default_factory=list)
    results: set[str] = field(default_factory=set)  # what an NCCL WARN returns (msgresult.py)


Key = tuple[str, str, str]  # source, file, template


def _extract(path: str, text: str) -> list[msgextract.Found]:
    return msgextract.extract_python(text) if path.endswith(".py") else msgextract.extract_c(text)


def _add(records: dict[Key, Record], source: str, label: str, path: str,
         found: list[msgextract.Found], results: dict[str, set[str]] | None = None) -> None:
    for item in found:
        key = (source, path, item.template)
        record = records.get(key)
        if record is None:
            record = records[key] = Record(source, path, item.template, item.level, item.call)
        elif msgmap.LEVEL_RANK[item.level] > msgmap.LEVEL_RANK[record.level]:
            record.level, record.call = item.level, item.call
        if label not in record.releases:
            record.releases.append(label)
        if results and item.call == "WARN":
            record.results |= results.get(item.template, set())


def read_git(records: dict[Key, Record], source: str, git: Git,
             revisions: list[tuple[str, str]], files: re.Pattern[str]) -> None:
    """Templates of the ``files`` at each (label, revision) of one repository."""
    cache: dict[str, tuple[list[msgextract.Found], dict[str, set[str]]]] = {}
    for label, rev in revisions:
        for path, sha in git.tree(rev):
            if not files.search(path):
                continue
            if sha not in cache:
                text = git.blob(sha)
                cache[sha] = (_extract(path, text),
                              msgresult.outcomes(text) if source == "nccl" else {})
            _add(records, source, label, _canonical(path), *cache[sha])
        print(f"  {source} {label}: {len(records)} templates so far", file=sys.stderr)


def read_repo(records: dict[Key, Record], order: dict[str, list[str]], source: str, git_dir: str,
              revisions_of: Callable[[Git], list[tuple[str, str]]], files: re.Pattern[str]) -> None:
    """Templates of the ``files`` at each release ``revisions_of`` names in one git dir."""
    git = Git(git_dir)
    revisions = revisions_of(git)
    for label, _ in revisions:
        _order(order, source, label)
    read_git(records, source, git, revisions, files)
    git.close()


def _canonical(path: str) -> str:
    """One name for a file across releases (NCCL renamed .cu to .cc; torch moved c10d)."""
    path = re.sub(r"^src/(.*)\.cu$", r"src/\1.cc", path)
    return path.replace("torch/lib/c10d/", "torch/csrc/distributed/c10d/")


def _walk_tree(root: Path) -> Iterator[tuple[str, Path]]:
    for file in root.rglob("*"):
        if file.is_file():
            rel = file.relative_to(root).as_posix()
            yield rel.replace("torch/include/torch/csrc/", "torch/csrc/"), file


def read_texts(records: dict[Key, Record], source: str, label: str,
               texts: Iterable[tuple[str, str]], files: re.Pattern[str]) -> None:
    """Templates of the (path, text) pairs of one release whose path ``files`` matches."""
    for rel, text in texts:
        if files.search(rel):
            _add(records, source, label, _canonical(rel), _extract(rel, text))


# One torch release read from files at hand: its label, where it was read (for the progress
# line) and its (path in the pytorch repository, text) pairs.
Release = tuple[str, str, Iterable[tuple[str, str]]]


def read_torch(records: dict[Key, Record], order: dict[str, list[str]],
               releases: Iterable[Release]) -> None:
    """Templates of torch releases read from wheels, stored .cpp files or a source tree."""
    for label, where, texts in releases:
        _order(order, "torch", label)
        read_texts(records, "torch", label, texts, TORCH_FILES)
        print(f"  torch {label} ({where}): {len(records)} templates so far", file=sys.stderr)


def torch_wheels(directory: Path) -> Iterator[Release]:
    """Every torch release of which ``directory`` holds a wheel (see ``torchwheels.py``)."""
    for label, wheel in torchwheels.wheels(directory):
        yield label, wheel.name, torchwheels.members(wheel)


def torch_cpp(directory: Path) -> Iterator[Release]:
    """The stored c10d ``.cpp`` files under ``directory`` (see ``torchcpp.py``)."""
    for label, root in torchcpp.trees(directory):
        yield label, f".cpp at {root.name}", torchcpp.texts(root)


def torch_tree(label: str, root: Path) -> Release:
    """A plain directory tree laid out like the pytorch repository, as one release."""
    texts = ((rel, file.read_text("utf-8", "replace")) for rel, file in _walk_tree(root))
    return label, f"tree {root}", texts


def _order(order: dict[str, list[str]], source: str, label: str) -> None:
    """Add a release label: versions in order, then the others (``git <commit>``, Gloo's dates)
    as they come."""
    releases = order.setdefault(source, [])
    if label not in releases:
        releases.append(label)
        releases.sort(key=lambda r: (0, _version_key(r)) if re.match(r"v\d", r) else (1, ()))


def nccl_revisions(git: Git) -> list[tuple[str, str]]:
    tags = [t for t in git.tags() if re.fullmatch(r"v2\.(\d+)\.\d+-\d+", t)
            and int(t.split(".")[1]) >= 4]
    return [(t, t) for t in sorted(tags, key=_version_key)]


def torch_revisions(git: Git) -> list[tuple[str, str]]:
    tags = [t for t in git.tags() if re.fullmatch(r"v(?:1\.(?:[89]|1[0-3])|2\.\d+)\.0", t)]
    return [(t, t) for t in sorted(tags, key=_version_key) if _version_key(t) <= (2, 13, 0)]


def gloo_revisions(git: Git) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for release, date in TORCH_DATES.items():
        commit = git.commit_before(date)
        if commit:
            out.append((f"{date} (torch {release[1:]})", commit))
    head = git.run("log", "-1", "--format=%H %cs", "HEAD").split()
    out.append((f"{head[1]} (newest)", head[0]))
    return out


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
    parser.add_argument("--add-torch-wheels", type=Path, metavar="DIR",
                        help="with --remap: the templates of torch's own Python outside "
                             "torch/distributed (DDP, SyncBatchNorm, DistributedSampler, "
                             "torch.cuda, torch.multiprocessing.spawn) from every wheel in DIR")
    parser.add_argument("--add-torch-distributed", type=Path, metavar="DIR",
                        help="with --remap: the templates of the rest of torch.distributed's "
                             "Python (FSDP, DTensor, checkpointing, RPC, pipelining, ...: "
                             "TORCH_MORE_FILES) from every wheel in DIR")
    args = parser.parse_args()
    if args.remap:
        document = remapped(json.loads(args.remap.read_text()))
        for spec in args.add:
            document = added(document, spec)
        if args.add_torch_wheels:
            document = added_torch_files(document, args.add_torch_wheels, TORCH_CORE_FILES,
                                         "torch's own Python outside torch/distributed")
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
