"""Every corpus log (tests/fixtures/real-logs/) reads the same however the tools around a run wrote
it down: with CRLF line ends, after a UTF-8 byte-order mark, as UTF-16LE after its mark (Windows
PowerShell 5.1's ">" and Out-File), with a log collector's time stamp before each line (`kubectl
logs --timestamps`, `docker logs --timestamps`: RFC 3339 with nanoseconds; the container runtime's
CRI log files add the stream and F), and compressed with gzip. Each form changes how the lines are
stored, never what they say, so the top finding (id and severity) must not move.
benchmarks/doctor_variants.py counts these and the forms no test holds to zero (a launcher's tag
or label on every line, colour codes)."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import pytest
from test_doctor_real_logs import CORPUS_DIR, LOGS

from ddpkit.doctor.log.diagnose import diagnose


def _utf16(data: bytes) -> bytes:
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\n", "\r\n")
    return b"\xff\xfe" + text.encode("utf-16-le")


def _stamped(stamp: bytes) -> Callable[[bytes], bytes]:
    return lambda data: b"\n".join(stamp + line if line else line for line in data.split(b"\n"))


FORMS: dict[str, Callable[[bytes], bytes]] = {
    "crlf": lambda data: data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"),
    "utf8-bom": lambda data: b"\xef\xbb\xbf" + data,
    "utf16le": _utf16,
    "kubectl-timestamps": _stamped(b"2024-10-11T20:10:11.640908017Z "),
    "cri-log-file": _stamped(b"2024-10-11T20:10:11.640908017Z stderr F "),
    "gzip": gzip.compress,
}


def _top(path: Path) -> tuple[str, str]:
    findings = diagnose([str(path)])
    return findings[0].id, findings[0].severity


@pytest.mark.parametrize("form", list(FORMS))
def test_every_corpus_log_reads_the_same_in_this_form(tmp_path: Path, form: str) -> None:
    moved = []
    for entry in LOGS:
        original = CORPUS_DIR / entry["file"]
        rewritten = tmp_path / entry["file"]
        rewritten.write_bytes(FORMS[form](original.read_bytes()))
        if _top(rewritten) != _top(original):
            moved.append(entry["file"])
    assert not moved, moved
