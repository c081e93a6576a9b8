"""causes/node_rank_claims.py: two nodes' launchers given the same node rank. The line is
DeepSpeed's launcher's own (v0.19.5 deepspeed/launcher/launch.py, main: ``logger.info(
f"nnodes={args.nnodes}, num_local_procs={num_local_procs}, node_rank={args.node_rank}")``)."""

from __future__ import annotations

from pathlib import Path

from ddpkit.doctor.log.diagnose import diagnose

LINE = ("[2024-05-01 10:00:0{n},000] [INFO] [launch.py:158:main] nnodes={nodes}, "
        "num_local_procs=8, node_rank={rank}")
LOST = "RuntimeError: Connection reset by peer"


def read(tmp_path: Path, *logs: list[str]) -> list[tuple[str, str]]:
    paths = []
    for i, lines in enumerate(logs):
        path = tmp_path / f"node{i}.log"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))
    return [(f.id, f.severity) for f in diagnose(paths)]


def test_two_logs_given_the_same_node_rank(tmp_path: Path) -> None:
    found = read(tmp_path, [LINE.format(n=0, nodes=2, rank=0)],
                 [LINE.format(n=1, nodes=2, rank=0), LOST])
    assert found[0] == ("rank-assignment", "error")


def test_each_its_own_node_rank_or_one_node_is_not_read_so(tmp_path: Path) -> None:
    own = read(tmp_path, [LINE.format(n=0, nodes=2, rank=0)], [LINE.format(n=1, nodes=2, rank=1)])
    assert "rank-assignment" not in dict(own)
    one = read(tmp_path, [LINE.format(n=0, nodes=1, rank=0)], [LINE.format(n=1, nodes=1, rank=0)])
    assert "rank-assignment" not in dict(one)
