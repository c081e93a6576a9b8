"""Stored versions of torch's c10d ``.cpp`` files, which no wheel holds (issue 24).

``catalogue_messages.py --torch-cpp DIR`` reads a tree laid out as ``DIR/<commit>/<path in the
pytorch repository>`` (e.g. ``DIR/cf1380df.../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp``),
one directory per commit the files were read at. Each commit is one release label: ``vX.Y.Z``
where ``DIR/<commit>/version.txt`` (the repository's own, at that commit) says so, else
``git <commit>`` (a stored version whose release is not known: listed after the releases).
The texts stay outside the repository; the catalogue keeps only the message templates.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


def label_of(commit_dir: Path) -> str:
    """The release a commit's files belong to: ``v2.0.1`` from its version.txt (``2.0.1``),
    else ``git <first 12 digits of the commit>``."""
    version = commit_dir / "version.txt"
    if version.is_file():
        found = re.fullmatch(r"(\d+\.\d+\.\d+)\s*", version.read_text("utf-8", "replace"))
        if found:
            return f"v{found.group(1)}"
    return f"git {commit_dir.name[:12]}"


def trees(directory: Path) -> list[tuple[str, Path]]:
    """(label, commit directory) of every commit under ``directory``."""
    return [(label_of(sub), sub) for sub in sorted(directory.iterdir())
            if sub.is_dir() and _COMMIT.match(sub.name)]


def texts(commit_dir: Path) -> Iterator[tuple[str, str]]:
    """(path in the repository, text) of every file stored for one commit."""
    for file in sorted(commit_dir.rglob("*")):
        if file.is_file() and file.name != "version.txt":
            yield file.relative_to(commit_dir).as_posix(), file.read_text("utf-8", "replace")
