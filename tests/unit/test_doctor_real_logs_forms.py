"""Every corpus log (tests/fixtures/real-logs/) reads the same however the tools around a run wrote
it down: with CRLF line ends, after a UTF-8 byte-order mark, as UTF-16LE after its mark (Windows
PowerShell 5.1's ">" and Out-File), with a log collector's time stamp before each line (`kubectl
logs --timestamps`, `docker logs --timestamps`: RFC 3339 with nanoseconds; the container runtime's
CRI log files add the stream and F), compressed with gzip, with a launcher's tag or label before
each line (torchrun's tee "[default0]:", torch's excepthook "[rank0]: ", srun --label, pdsh,
Docker Compose), with trailing spaces, and with colour codes around each line. Each form changes
how the lines are stored, never what they say, so the top finding (id and severity) must not move.
The forms and their rewrites are benchmarks/doctor_variants.py's, which counts the moved answers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from test_doctor_real_logs import CORPUS_DIR, LOGS

from ddpkit.doctor.log.diagnose import diagnose

# the forms' rewrites are the benchmark's (benchmarks/doctor_variants.py), one spelling of each
_SPEC = importlib.util.spec_from_file_location(
    "doctor_variants", Path(__file__).resolve().parents[2] / "benchmarks" / "doctor_variants.py")
assert _SPEC is not None and _SPEC.loader is not None
_VARIANTS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_VARIANTS)
HELD = tuple(_VARIANTS.FORMS)


def _top(path: Path) -> tuple[str, str]:
    findings = diagnose([str(path)])
    return findings[0].id, findings[0].severity


@pytest.mark.parametrize("form", HELD)
def test_every_corpus_log_reads_the_same_in_this_form(tmp_path: Path, form: str) -> None:
    rewrite = _VARIANTS.FORMS[form]
    moved = []
    for entry in LOGS:
        original = CORPUS_DIR / entry["file"]
        rewritten = tmp_path / entry["file"]
        rewritten.write_bytes(rewrite(original.read_bytes()))
        if _top(rewritten) != _top(original):
            moved.append(entry["file"])
    assert not moved, moved
