"""A compressed log reads as the log itself (doctor/log/log_bytes.py): gzip (RFC 1952; logrotate's
compress, `gzip train.log`), xz and bzip2, each known by its magic number and read by the
standard library's reader a chunk at a time; a compressed UTF-16 log (PowerShell's) too. A stream
cut short ends the log where it stops; damaged data and zstd are log-unreadable, naming why, in
seconds. Lines made from CPython's argparse ("%(prog)s: error: argument %s: invalid %s value: %r")
and c10d's error-level connect failure (socket.cpp)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from collections.abc import Callable
from pathlib import Path

import pytest

from ddpkit.doctor.log.diagnose import diagnose
from ddpkit.doctor.log.log_bytes import log_chunks
from ddpkit.errors import ConfigError

LINES = ["usage: train.py [-h] [--rank RANK]",
         "train.py: error: argument --rank: invalid int value: ''"]
RETRY = ("[E1204 09:50:12.118000 3107 socket.cpp:860] [c10d] The client socket has failed to "
         "connect to [10.0.0.1]:29500 (errno: 111 - Connection refused).")
COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress, "xz": lzma.compress, "bzip2": bz2.compress,
    # (several gzip members one after another, as `cat a.gz b.gz` makes: one log)
    "gzip-members": lambda data: gzip.compress(data[:40]) + gzip.compress(data[40:]),
}


def _text(lines: list[str]) -> bytes:
    return "".join(f"{line}\n" for line in lines).encode()


@pytest.mark.parametrize("form", list(COMPRESS))
@pytest.mark.parametrize("lines", [LINES, [RETRY] * 3000])
def test_a_compressed_log_reads_as_itself(tmp_path: Path, form: str, lines: list[str]) -> None:
    plain, packed = tmp_path / "train.log", tmp_path / "train.log.z"
    plain.write_bytes(_text(lines))
    packed.write_bytes(COMPRESS[form](_text(lines)))
    want, got = diagnose([str(plain)])[0], diagnose([str(packed)])[0]
    assert (got.id, got.severity) == (want.id, want.severity) != ("no-result", "warning")
    assert [e.line for e in got.evidence] == [e.line for e in want.evidence]


def test_a_compressed_utf16_log(tmp_path: Path) -> None:
    utf16 = b"\xff\xfe" + "".join(f"{line}\r\n" for line in LINES).encode("utf-16-le")
    log = tmp_path / "train.log.gz"
    log.write_bytes(gzip.compress(utf16))
    assert diagnose([str(log)])[0].id == "rank-assignment"


def test_a_stream_cut_short_ends_the_log_there(tmp_path: Path) -> None:
    data = gzip.compress(_text(["step 1 loss 0.5"] * 2000 + LINES))
    log = tmp_path / "train.log.gz"
    log.write_bytes(data[: len(data) - 30])  # (its last bytes and trailer missing)
    out = b"".join(log_chunks(io.BytesIO(log.read_bytes()), 4096))
    assert out.startswith(b"step 1 loss 0.5\n") and len(out) < len(_text(["step 1 loss 0.5"] * 2000 + LINES))
    diagnose([str(log)])  # (reads what is there, no error)


@pytest.mark.parametrize(("data", "words", "fix"), [
    (b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"not deflate data at all" * 10, "gzip data is damaged",
     "zcat <file>"),
    (b"\xfd7zXZ\x00" + b"garbage" * 10, "xz data is damaged", "xzcat <file>"),
    (b"\x28\xb5\x2f\xfd" + b"\x00" * 40, "compressed with zstd", "zstd -dc <file>"),
])
def test_damaged_or_unread_compression_is_log_unreadable(tmp_path: Path, data: bytes,
                                                        words: str, fix: str) -> None:
    log = tmp_path / "train.log.gz"
    log.write_bytes(data)
    with pytest.raises(ConfigError) as caught:
        diagnose([str(log)])
    assert caught.value.error_id == "log-unreadable"
    assert words in caught.value.message and str(log) in caught.value.message
    assert fix in caught.value.hint
