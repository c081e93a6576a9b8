"""A log Windows PowerShell 5.1 saved reads as the same log in UTF-8: its ">" and Out-File write
"Unicode" by default, UTF-16LE after its byte-order mark (FF FE), with CRLF line ends; UTF-16BE
(FE FF) the same. Lines made from CPython's argparse ("%(prog)s: error: argument %s: invalid %s
value: %r") and c10d's error-level connect failure (socket.cpp)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ddpkit.doctor.log.diagnose import diagnose
from ddpkit.doctor.log.log_bytes import log_chunks
from ddpkit.doctor.log.scan import CHUNK_BYTES

LINES = ["usage: train.py [-h] [--rank RANK]", "train.py: error: argument --rank: invalid int value: ''"]
RETRY = ("[E1204 09:50:12.118000 3107 socket.cpp:860] [c10d] The client socket has failed to "
         "connect to [10.0.0.1]:29500 (errno: 111 - Connection refused).")


@pytest.mark.parametrize(("bom", "codec"), [(b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")])
@pytest.mark.parametrize("lines", [LINES, [RETRY] * 3, ["训练开始 epoch 0", *LINES]])
def test_a_utf16_log_reads_as_its_utf8_self(tmp_path: Path, bom: bytes, codec: str,
                                            lines: list[str]) -> None:
    utf8, utf16 = tmp_path / "utf8.log", tmp_path / "utf16.log"
    utf8.write_text("\n".join(lines) + "\n", encoding="utf-8")
    utf16.write_bytes(bom + "".join(f"{line}\r\n" for line in lines).encode(codec))
    want, got = diagnose([str(utf8)])[0], diagnose([str(utf16)])[0]
    assert (got.id, got.severity) == (want.id, want.severity) != ("no-result", "warning")
    assert [e.line for e in got.evidence] == [e.line for e in want.evidence]


def test_a_character_split_between_chunks_and_an_odd_last_byte() -> None:
    # the decoder keeps a unit cut at a chunk's end for the next one; a lone last byte is one
    # replacement character, not an error
    text = "é" * (CHUNK_BYTES // 2 + 1) + "\n"
    data = b"\xff\xfe" + text.encode("utf-16-le") + b"\x41"
    out = b"".join(log_chunks(io.BytesIO(data), CHUNK_BYTES)).decode("utf-8")
    assert out == text + "\ufffd"


def test_other_logs_pass_unchanged() -> None:
    data = b"\xfe\x00 not a byte-order mark\n" * 3
    assert b"".join(log_chunks(io.BytesIO(data), CHUNK_BYTES)) == data
