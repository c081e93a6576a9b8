"""Unit parsing: sizes (binary K/M/G as nccl-tests, SI KB/MB/GB), counts (SI), rates (bits vs bytes)."""

from __future__ import annotations

import pytest

from ddpkit.bench.units import (
    format_bytes,
    format_count,
    format_rate,
    format_seconds,
    parse_count,
    parse_duration,
    parse_rate,
    parse_size,
)
from ddpkit.errors import DdpkitError, ExitCode


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", 4096),
        ("8B", 8),
        ("1K", 1024),
        ("1k", 1024),
        ("256M", 256 * 2**20),
        ("64MiB", 64 * 2**20),
        ("1.5GiB", 3 * 2**29),
        ("14GB", 14 * 10**9),
        ("1KB", 1000),
        ("2 TB", 2 * 10**12),
        ("3 bytes", 3),
    ],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "1X", "-5K", "0", "1iB", "14gb", "1Kb", "8bit", "1.2.3K"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(DdpkitError) as info:
        parse_size(text, flag="--model-bytes")
    assert info.value.error_id == "bad-size"
    assert info.value.exit_code == ExitCode.USAGE
    assert "--model-bytes" in info.value.message
    assert info.value.hint


def test_size_in_bits_says_so() -> None:
    with pytest.raises(DdpkitError) as info:
        parse_size("14gb")
    assert "bits" in info.value.message
    assert "14GB" in info.value.hint and "14GiB" in info.value.hint


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7B", 7_000_000_000),
        ("7b", 7_000_000_000),
        ("1.3B", 1_300_000_000),
        ("125M", 125_000_000),
        ("350K", 350_000),
        ("25e6", 25_000_000),
        ("25_000_000", 25_000_000),
        ("21000000", 21_000_000),
        ("1T", 10**12),
    ],
)
def test_parse_count(text: str, expected: int) -> None:
    assert parse_count(text) == expected


@pytest.mark.parametrize("text", ["", "B", "7X", "0", "-3M", "7 GB/s"])
def test_parse_count_rejects(text: str) -> None:
    with pytest.raises(DdpkitError) as info:
        parse_count(text)
    assert info.value.error_id == "bad-count"


@pytest.mark.parametrize(
    ("text", "bytes_per_s"),
    [
        ("25Gbit", 25e9 / 8),
        ("1gbit", 1e9 / 8),
        ("1Gbit/s", 1e9 / 8),
        ("10Gb/s", 10e9 / 8),
        ("10Gbps", 10e9 / 8),
        ("100 Mbit/s", 100e6 / 8),
        ("300GB/s", 300e9),
        ("12.5 GBps", 12.5e9),
        ("1GiB/s", 2.0**30),
        ("8Gibit", 2.0**30),
        ("2 bytes/s", 2.0),
        ("800 bit/s", 100.0),
    ],
)
def test_parse_rate(text: str, bytes_per_s: float) -> None:
    assert parse_rate(text) == pytest.approx(bytes_per_s)


def test_bits_and_bytes_differ_by_eight() -> None:
    assert parse_rate("10GB/s") == pytest.approx(8 * parse_rate("10Gb/s"))


@pytest.mark.parametrize("text", ["25", "25G", "25 Gig", "fast", "0Gbit", "25Xbit", "-1GB/s"])
def test_parse_rate_rejects(text: str) -> None:
    with pytest.raises(DdpkitError) as info:
        parse_rate(text, flag="--inter-node")
    assert info.value.error_id == "bad-rate"
    assert "--inter-node" in info.value.message
    assert "Gbit" in info.value.hint


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0.8s", 0.8), ("800ms", 0.8), ("291 ms", 0.291), ("250us", 250e-6), ("1.5", 1.5),
     ("2min", 120.0), ("5µs", 5e-6)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "fast", "0s", "3h", "1m"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(DdpkitError) as info:
        parse_duration(text)
    assert info.value.error_id == "bad-duration"


def test_formatting() -> None:
    assert format_bytes(84e6) == "84.0 MB"
    assert format_bytes(0) == "0 B"
    assert format_count(7e9) == "7.00B"
    assert format_count(21e6) == "21.0M"
    assert format_seconds(0.291) == "291 ms"
    assert format_seconds(1.234) == "1.23 s"
    assert format_seconds(0) == "0 s"
    assert format_rate(parse_rate("25Gbit")) == "25.0 Gbit/s (3.12 GB/s)"
