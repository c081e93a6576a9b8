"""nccl-tests' bandwidth formulas and -b/-e/-f sweeps (doc/PERFORMANCE.md of nccl-tests)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ddpkit.bench import formulas
from ddpkit.bench.formulas import (
    algbw,
    all_reduce_seconds,
    busbw,
    busbw_factor,
    element_count,
    parse_sweep_size,
    sweep_sizes,
)


@pytest.mark.parametrize(
    ("op", "ranks", "factor"),
    [
        ("all_reduce", 1, 0.0),
        ("all_reduce", 2, 1.0),
        ("all_reduce", 8, 1.75),
        ("all_reduce", 16, 1.875),
        ("all_gather", 2, 0.5),
        ("all_gather", 8, 0.875),
        ("reduce_scatter", 4, 0.75),
        ("all_to_all", 16, 0.9375),
        ("broadcast", 8, 1.0),
        ("reduce", 8, 1.0),
        ("send_recv", 2, 1.0),
    ],
)
def test_busbw_factor(op: str, ranks: int, factor: float) -> None:
    assert busbw_factor(op, ranks) == pytest.approx(factor)


def test_busbw_factor_rejects_unknown_and_zero_ranks() -> None:
    with pytest.raises(ValueError, match="unknown collective"):
        busbw_factor("all_shuffle", 2)
    with pytest.raises(ValueError, match="ranks"):
        busbw_factor("all_reduce", 0)


def test_algbw_and_busbw() -> None:
    # 1 GB all_reduce in 0.5 s on 4 ranks: algbw 2 GB/s, busbw 2 * 2*3/4 = 3 GB/s.
    assert algbw(1e9, 0.5) == pytest.approx(2e9)
    assert busbw("all_reduce", 1e9, 0.5, 4) == pytest.approx(3e9)
    assert busbw("all_gather", 1e9, 0.5, 4) == pytest.approx(1.5e9)
    with pytest.raises(ValueError):
        algbw(1.0, 0.0)


def test_all_reduce_seconds_inverts_busbw() -> None:
    seconds = all_reduce_seconds(84e6, 125e6, 2)  # 21M fp32 grads over 1 Gbit/s, 2 ranks
    assert seconds == pytest.approx(0.672)
    assert busbw("all_reduce", 84e6, seconds, 2) == pytest.approx(125e6)


def test_element_count_aligns_chunked_collectives() -> None:
    assert element_count("all_reduce", 1000, 4, 3) == 250
    assert element_count("all_gather", 1000, 4, 3) == 249
    assert element_count("all_to_all", 1024, 4, 8) == 256
    assert element_count("reduce_scatter", 8, 4, 4) == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [("8", 8), ("1K", 1024), ("64k", 65536), ("256M", 256 << 20), ("1G", 1 << 30),
     ("64MiB", 64 << 20), ("8B", 8)],
)
def test_parse_sweep_size(text: str, expected: int) -> None:
    assert parse_sweep_size(text) == expected


@pytest.mark.parametrize("text", ["0", "1KB", "1.5M", "x", "1iB", "-1K", "1Kb"])
def test_parse_sweep_size_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_sweep_size(text)


def test_sweep_sizes_factor_and_step() -> None:
    assert sweep_sizes(1024, 65536, 4) == [1024, 4096, 16384, 65536]
    assert sweep_sizes(1024, 60000, 4) == [1024, 4096, 16384]
    assert sweep_sizes(8, 8) == [8]
    assert sweep_sizes(100, 400, step=100) == [100, 200, 300, 400]
    assert len(sweep_sizes(1, 1 << 30)) == 31


@pytest.mark.parametrize(
    ("begin", "end", "factor", "step"),
    [(0, 8, 2, None), (16, 8, 2, None), (1, 8, 1, None), (1, 10**9, 2, 1), (1, 8, 2, 0)],
)
def test_sweep_sizes_rejects(begin: int, end: int, factor: int, step: int | None) -> None:
    with pytest.raises(ValueError):
        sweep_sizes(begin, end, factor, step)


def test_formulas_is_stdlib_only() -> None:
    """Worker programs import this module, so it may import nothing outside the stdlib."""
    tree = ast.parse(Path(formulas.__file__).read_text())
    imported = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert imported <= {"__future__", "re"}, imported
