"""A log's bytes as the patterns read them, UTF-8, however the file was stored.

A log compressed with gzip, xz or bzip2 (logrotate's ``compress``, a cluster's archived job logs,
``train.log.gz`` attached to a thread) is decompressed as it is read, by the standard library's
readers (``gzip.GzipFile``, ``lzma.LZMAFile``, ``bz2.BZ2File``), which hand back at most the bytes
asked for. A log that starts with a UTF-16 byte-order mark (Windows PowerShell 5.1's ``>`` and
``Out-File`` write "Unicode", UTF-16LE) is decoded as it is read. Neither ever holds more than a
chunk. Each format is known by its first bytes, its magic number (RFC 1952 for gzip, the .xz file
format's header, bzip2's "BZh"). A compressed stream cut short (copied while it was written) ends
the log where it stops, as a log cut short does; one whose data is damaged is an ``OSError``
that names it. Zstandard, which Python's standard library reads only from 3.14, is refused with
the command that decompresses it.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import itertools
import lzma
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

from ddpkit.i18n import _

# each compressed format by its magic number (RFC 1952 for gzip, the .xz file format's header,
# bzip2's "BZh")
_MAGIC = ((b"\x1f\x8b", "gzip"), (b"\xfd7zXZ\x00", "xz"), (b"BZh", "bzip2"))
# what decompresses each to stdout, as far as its data is whole
_COMMANDS = {"gzip": "zcat", "xz": "xzcat", "bzip2": "bzcat"}
_ZSTD = b"\x28\xb5\x2f\xfd"
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


class UnreadableFormat(OSError):
    """A log stored in a form ddpkit cannot read, with the command that makes it readable."""

    def __init__(self, reason: str, fix: str) -> None:
        super().__init__(reason)
        self.fix = fix


class _Rejoined:
    """The bytes already read from a stream, then the rest of it: what a decompressor reads."""

    def __init__(self, first: bytes, stream: BinaryIO) -> None:
        self.first, self.stream = first, stream

    def read(self, size: int = -1) -> bytes:
        if self.first:
            part = self.first if size < 0 else self.first[:size]
            self.first = self.first[len(part):]
            return part
        return self.stream.read(size)


def log_chunks(stream: BinaryIO, size: int) -> Iterator[bytes]:
    """``stream``'s text as UTF-8, in chunks of about ``size`` bytes (decompressed and decoded as
    its first bytes say); ``OSError`` for a damaged compressed stream or one ddpkit cannot read."""
    first = stream.read(size)
    for magic, name in _MAGIC:
        if first.startswith(magic):
            with _reader(name, _Rejoined(first, stream)) as reader:
                yield from _utf8(_decompressed(reader, name, size))
            return
    if first.startswith(_ZSTD):
        raise UnreadableFormat(_("it is compressed with zstd, which this Python cannot read"),
                               _("decompress it into ddpkit: zstd -dc <file> | ddpkit doctor "
                                 "--log -"))
    yield from _utf8(_rest(first, stream, size))


def _reader(name: str, raw: Any) -> gzip.GzipFile | lzma.LZMAFile | bz2.BZ2File:
    """The standard library's reader of the compressed format ``name`` over ``raw``."""
    if name == "gzip":
        return gzip.GzipFile(fileobj=raw)
    if name == "xz":
        return lzma.LZMAFile(raw)
    return bz2.BZ2File(raw)


def _rest(first: bytes, stream: BinaryIO, size: int) -> Iterator[bytes]:
    # A terminal's end of input (Ctrl-D) ends one read, not the stream: a buffered read returns
    # what was typed before it, and the next would wait for another. On a terminal a short read
    # is the end; elsewhere (files, pipes) only an empty one is.
    interactive = _is_terminal(stream)
    chunk = first
    while chunk:
        yield chunk
        if interactive and len(chunk) < size:
            return
        chunk = stream.read(size)


def _is_terminal(stream: BinaryIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, OSError, ValueError):  # (a stream without a descriptor, or closed)
        return False


def _decompressed(reader: gzip.GzipFile | lzma.LZMAFile | bz2.BZ2File, name: str,
                  size: int) -> Iterator[bytes]:
    while True:
        try:
            chunk = reader.read(size)
        except EOFError:
            return  # (cut short: the log ends where its compressed stream does)
        except (OSError, lzma.LZMAError, zlib.error, ValueError) as exc:
            raise UnreadableFormat(
                _("its {format} data is damaged ({error})", format=name,
                  error=str(exc) or type(exc).__name__),
                _("copy the log again from where the run wrote it; a damaged {format} file "
                  "keeps what precedes the damage: {command} <file> | ddpkit doctor --log -",
                  format=name, command=_COMMANDS[name])) from exc
        if not chunk:
            return
        yield chunk


def _utf8(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The chunks as UTF-8: decoded from UTF-16 where the first starts with its byte-order mark."""
    first = next(chunks, b"")
    if not first.startswith(_UTF16_BOMS):
        if first:
            yield first
        yield from chunks
        return
    decoder = codecs.getincrementaldecoder("utf-16")("replace")
    for chunk in itertools.chain((first,), chunks):
        text = decoder.decode(chunk)
        if text:
            yield text.encode("utf-8", "replace")
    rest = decoder.decode(b"", final=True)  # (an odd last byte: a replacement character)
    if rest:
        yield rest.encode("utf-8", "replace")
