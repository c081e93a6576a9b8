"""The sweep worker's correctness check: its expected values match each collective's semantics.

Each collective is emulated here from the per-rank inputs (no process group), so a wrong expected
formula, or a check that cannot see a wrong element, fails without a cluster.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from ddpkit.workers import collectives  # noqa: E402
from ddpkit.workers.collectives import OPS, parse_args  # noqa: E402

CPU = torch.device("cpu")


def _emulate(op: str, sends: list, n: int) -> list:
    """What each rank receives, computed from every rank's send buffer."""
    if op == "all_reduce":
        total = torch.stack([s.double() for s in sends]).sum(0)
        return [total for _ in range(n)]
    if op == "broadcast":
        return [sends[0].double() for _ in range(n)]
    if op == "all_gather":
        return [torch.cat([s.double() for s in sends]) for _ in range(n)]
    chunks = [s.double().chunk(n) for s in sends]
    if op == "reduce_scatter":
        return [torch.stack([chunks[src][dst] for src in range(n)]).sum(0) for dst in range(n)]
    return [torch.cat([chunks[src][dst] for src in range(n)]) for dst in range(n)]  # all_to_all


@pytest.mark.parametrize("n", [1, 2, 3, 8])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bfloat16])
def test_expected_values_match_the_collective(op: str, n: int, dtype: object) -> None:
    count = collectives.element_count(op, 4096, 4, n)
    per_rank = [collectives._inputs(op, count, rank, n, CPU, dtype) for rank in range(n)]
    received = _emulate(op, [send for send, _, _ in per_rank], n)
    for rank, (_, _, expected) in enumerate(per_rank):
        assert expected.shape == received[rank].shape
        got = received[rank].to(dtype)
        assert collectives._wrong(got, expected, dtype) == 0
        # A check that cannot fail is no check: corrupt two elements, see exactly two.
        bad = got.clone()
        bad[0] += 100
        bad[-1] -= 100
        assert collectives._wrong(bad, expected, dtype) == 2


def test_chunk_from_the_wrong_rank_is_caught() -> None:
    n, count = 4, collectives.element_count("all_gather", 1024, 4, 4)
    per_rank = [collectives._inputs("all_gather", count, r, n, CPU, torch.float32) for r in range(n)]
    sends = [s for s, _, _ in per_rank]
    swapped = torch.cat([sends[1], sends[0], sends[2], sends[3]])
    assert collectives._wrong(swapped, per_rank[0][2], torch.float32) == 2 * (count // n)


def test_worker_arguments() -> None:
    args = parse_args(["-b", "1K", "-e", "64K", "-f", "4", "--ops", "all_reduce,broadcast",
                       "-d", "half"])
    assert args.sizes == [1024, 4096, 16384, 65536]
    assert args.ops == ["all_reduce", "broadcast"] and args.datatype == "float16"
    for bad in (["-b", "1KB"], ["-b", "64K", "-e", "1K"], ["--ops", "gossip"], ["-d", "int8"],
                ["-n", "0"], ["-f", "1"]):
        with pytest.raises(SystemExit) as info:
            parse_args(bad)
        assert info.value.code == 2
