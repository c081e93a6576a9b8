"""The one atomic-replace helper: readers see the old or the new content, failures leave nothing."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from ddpkit.atomic_file import is_temp_name, replace_file, replacing

SRC = Path(__file__).resolve().parents[2] / "src" / "ddpkit"


def test_replace_file_writes_text_and_bytes_with_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "doc.json"
    replace_file(target, "first\n")
    replace_file(target, b"second\n", mode=0o600)
    assert target.read_bytes() == b"second\n"
    assert target.stat().st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path) == ["doc.json"]


def test_a_failed_replace_leaves_the_target_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "busy"
    target.mkdir()  # renaming a file over a directory fails
    (target / "inside").write_text("kept")
    with pytest.raises(OSError):
        replace_file(target, "new")
    assert (target / "inside").read_text() == "kept"
    assert os.listdir(tmp_path) == ["busy"]


def test_replacing_swaps_in_the_file_only_when_the_block_succeeds(tmp_path: Path) -> None:
    target = tmp_path / "plot.png"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), replacing(target, suffix=".png") as tmp:
        assert tmp.suffix == ".png" and is_temp_name(tmp.name)
        assert Path(os.path.realpath(tmp)).parent == tmp_path  # inside the directory opened once
        tmp.write_bytes(b"half")
        raise RuntimeError("the writer failed")
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["plot.png"]
    with replacing(target, suffix=".png") as tmp:
        tmp.write_bytes(b"new")
    assert target.read_bytes() == b"new" and os.listdir(tmp_path) == ["plot.png"]


def test_temporaries_are_never_shared_between_writers(tmp_path: Path) -> None:
    target = tmp_path / "x"
    with replacing(target) as first, replacing(target) as second:
        assert first != second
        first.write_text("1")
        second.write_text("2")
    assert target.read_text() == "1"  # the outer block ends last and wins


def test_only_the_atomic_modules_rename_files() -> None:
    """One home for atomic writes: nothing else in the package calls os.replace/os.rename."""
    allowed = {"atomic_file.py", "ncclconf/atomic.py"}
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        relative = str(path.relative_to(SRC))
        if relative in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("replace", "rename") and \
                    isinstance(node.value, ast.Name) and node.value.id == "os":
                offenders.append(f"{relative}:{node.lineno}")
    assert offenders == []
