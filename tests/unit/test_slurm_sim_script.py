"""benchmarks/slurm_sim.py without Slurm: it says what is missing and exits 2, starting nothing."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "slurm_sim.py"


def test_without_slurm_it_names_what_is_missing(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("slurm_sim", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "SYSTEM_PATH", "/nonexistent")
    monkeypatch.setattr(module, "up", lambda *a, **k: pytest.fail("must not bring up a sim"))
    assert module.main([]) == 2
    err = capsys.readouterr().err
    assert "Slurm/munge not installed" in err and "apt-get install slurm-wlm munge" in err
    assert "slurmctld (Debian package slurmctld)" in err and "munged (Debian package munge)" in err
