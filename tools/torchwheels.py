"""torch's distributed sources out of its PyPI wheels, one per minor release (issue 24).

The pytorch git repository is too large to have at hand everywhere; a torch wheel holds what the
catalogue reads of a release: the Python sources of ``torch/distributed`` (and of ``CORE``: DDP,
SyncBatchNorm, DistributedSampler, torch.cuda's init, torch.multiprocessing.spawn) and the c10d
headers
(``torch/include/torch/csrc/distributed/c10d/*.hpp``, ``torch/include/c10d/*.hpp`` before 1.9).
The smallest wheels are the macOS ones (no CUDA: 50-150 MB instead of GBs); they lack NCCL's
headers before the arm64 builds, and no wheel holds the c10d ``.cpp`` files (see ``--torch-cpp``
of ``catalogue_messages.py``). Wheels are read as zip files, never installed.

    python tools/torchwheels.py DIR [VERSION ...]

downloads (``pip download --no-deps --only-binary=:all:``) the last patch release of each minor
1.8 .. 2.13 (or the VERSIONs given) into DIR, skipping those already there; the same as, per
version, e.g.

    pip download torch==2.12.1 --no-deps --only-binary=:all: --platform macosx_14_0_arm64 \\
        --python-version 3.12 -d DIR

(older releases: ``--platform macosx_10_9_x86_64 --python-version 3.9``).
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

# The last patch release of each minor release 1.8 .. 2.13 (as on PyPI in December 2026).
RELEASES = ("1.8.1", "1.9.1", "1.10.2", "1.11.0", "1.12.1", "1.13.1", "2.0.1", "2.1.2", "2.2.2",
            "2.3.1", "2.4.1", "2.5.1", "2.6.0", "2.7.1", "2.8.0", "2.9.1", "2.10.0", "2.11.0",
            "2.12.1", "2.13.0")
# (platform, python versions) tried in turn: the first that has a wheel is taken.
PLATFORMS = (("macosx_14_0_arm64", ("3.12", "3.11", "3.10")),
             ("macosx_10_9_x86_64", ("3.9", "3.8")))
_WHEEL = re.compile(r"^torch-(\d+\.\d+\.\d+)(?:\+\w+)?-[^/]+\.whl$")
# torch's own Python outside torch.distributed whose checks a distributed run fails on:
# DistributedDataParallel, SyncBatchNorm, DistributedSampler, CUDA's lazy initialisation
# (torch.cuda) and torch.multiprocessing.spawn's report of a process's end
CORE = (r"torch/(?:nn/parallel/distributed|nn/modules/batchnorm|utils/data/distributed"
        r"|cuda/__init__|multiprocessing/spawn)\.py")
# Members read: the Python sources of torch.distributed, CORE, and the c10d headers.
_MEMBER = re.compile(rf"^(?:torch/distributed/.+\.py|{CORE}"
                     r"|torch/include/(?:torch/csrc/distributed/)?c10d/[^/]+\.(?:hpp|h))$")


def version_of(wheel: Path) -> str | None:
    """``2.12.1`` for ``torch-2.12.1-cp312-none-macosx_11_0_arm64.whl``; None for others."""
    found = _WHEEL.match(wheel.name)
    return found.group(1) if found else None


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in version.split("."))


def wheels(directory: Path) -> list[tuple[str, Path]]:
    """(``vX.Y.Z``, wheel) of each torch release in ``directory``, oldest first (one per
    version: the smallest wheel where several are there)."""
    best: dict[str, Path] = {}
    for wheel in directory.glob("torch-*.whl"):
        version = version_of(wheel)
        if version and (version not in best or wheel.stat().st_size < best[version].stat().st_size):
            best[version] = wheel
    return [(f"v{v}", best[v]) for v in sorted(best, key=_key)]


def members(wheel: Path) -> Iterator[tuple[str, str]]:
    """(path as in the pytorch repository, text) of every file of a wheel the catalogue reads:
    ``torch/include/torch/csrc/...`` is ``torch/csrc/...``, ``torch/include/c10d/`` (before
    1.9) is ``torch/lib/c10d/``."""
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(archive.namelist()):
            if not _MEMBER.match(name):
                continue
            path = name.replace("torch/include/torch/csrc/", "torch/csrc/")
            path = path.replace("torch/include/c10d/", "torch/lib/c10d/")
            yield path, archive.read(name).decode("utf-8", "replace")


def download(directory: Path, versions: tuple[str, ...] = RELEASES) -> list[str]:
    """Fetch the wheel of each version not yet in ``directory``; the versions none was found
    for."""
    directory.mkdir(parents=True, exist_ok=True)
    have = {version_of(w) for w in directory.glob("torch-*.whl")}
    missing = []
    for version in versions:
        if version in have or _fetch(directory, version):
            continue
        missing.append(version)
    return missing


def _fetch(directory: Path, version: str) -> bool:
    for platform, pythons in PLATFORMS:
        for python in pythons:
            done = subprocess.run(
                [sys.executable, "-m", "pip", "download", f"torch=={version}", "--no-deps",
                 "--only-binary=:all:", "--platform", platform, "--python-version", python,
                 "-d", str(directory)], capture_output=True, check=False)
            if done.returncode == 0:
                print(f"  torch {version}: {platform} cp{python}", file=sys.stderr)
                return True
    return False


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    missing = download(Path(argv[0]), tuple(argv[1:]) or RELEASES)
    for version in missing:
        print(f"  torch {version}: no wheel found", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
