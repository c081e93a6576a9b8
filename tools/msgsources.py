"""Where the message catalogue's templates come from: which files of NCCL, Gloo and torch are read,
at which releases (git tags, Gloo's commits by torch's release dates, torch wheels, stored c10d
.cpp files, a plain source tree), and the records of what each release prints. Used by
catalogue_messages.py, which maps and writes them."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgextract
import msgmap
import msgresult
import torchcpp
import torchwheels

# NCCL's host code, all of it: its init, transports, topology search (graph/), enqueue, argument
# checks, plugins, wrappers (CUDA, NVML, verbs) and headers; not its device kernels or NVTX
NCCL_FILES = re.compile(r"^src/(?!device/|include/nvtx)(?:[^/]+/)*[^/]+\.(?:cc|cu|h)$")
GLOO_FILES = re.compile(r"^gloo/(?:transport/tcp/(?!tls/)[^/]+|rendezvous/(?!redis)[^/]+|common/linux)"
                        r"\.(?:cc|h)$")
# torch's launch and process-group Python: the launchers, init_process_group and its rendezvous,
# torchelastic's agent, rendezvous, worker processes and utilities (--add-torch-launch reads them
# anew from the wheels)
_TORCH_LAUNCH = (r"^torch/distributed/(?:run|launch|distributed_c10d|rendezvous)\.py$"
                 r"|^torch/distributed/launcher/[^/]+\.py$"
                 r"|^torch/distributed/elastic/(?:agent/server|rendezvous|multiprocessing|utils)/"
                 r"(?:[^/]+/)*[^/]+\.py$")
TORCH_LAUNCH_FILES = re.compile(_TORCH_LAUNCH)
TORCH_FILES = re.compile(
    r"^torch/(?:csrc/distributed/c10d|lib/c10d)/(?:socket|TCPStore\w*|FileStore|ProcessGroupGloo"
    r"|ProcessGroupNCCL|NCCLUtils|Utils|GlooDeviceFactory|Backoff|ProcessGroupWrapper)"
    r"\.(?:cpp|hpp|h)$"
    rf"|{_TORCH_LAUNCH}"
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
