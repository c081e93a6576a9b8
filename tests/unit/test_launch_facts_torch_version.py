"""The torch version a launch plans with, read without importing torch or importlib.metadata."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

from ddpkit.launch.node import facts


def test_same_text_as_torch_itself_and_the_same_release_as_its_metadata() -> None:
    torch = pytest.importorskip("torch")
    found = facts._torch_version()
    assert found == torch.__version__
    # PyPI's CUDA wheels carry no local tag in their metadata ("2.14.1") while torch says
    # "2.14.1+cu130"; the CPU wheels have it in both ("2.13.0+cpu"): the release is the same
    assert found is not None and found.split("+")[0] == metadata.version("torch").split("+")[0]


def _fake_torch(root: Path, version_py: str | None) -> None:
    package = root / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("")
    if version_py is not None:
        (package / "version.py").write_text(version_py)


def test_reads_the_version_line_of_another_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_torch(tmp_path, "from typing import Optional\n__version__ = \"2.1.2+cu121\"\ndebug = False\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert facts._torch_version() == "2.1.2+cu121"


@pytest.mark.parametrize("version_py", [None, "", "version = 'x'\n"])
def test_none_without_a_readable_version_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              version_py: str | None) -> None:
    _fake_torch(tmp_path, version_py)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert facts._torch_version() is None


def test_none_without_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert facts._torch_version() is None
