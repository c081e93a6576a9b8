"""What reading a failed node's run directory costs at failure time (issue 24: one engine for
launch's summary and ``doctor --log``), on a huge rank log, against streaming that log whole.

A node that failed reads its run directory with ``doctor.log.verdict.read_node`` (its ranks'
ends, the events of each log's first 2 MiB and last 4 MiB, the part between only counted for line
numbers) and sends that reading to the master. This writes a run directory whose rank stderr is
``--mb`` MB of training lines with a traceback at the end, then times ``read_node`` and the whole
verdict against a full ``scan`` of the same file (what ``doctor --log`` did before), best of
``--rounds``. The ratio (full / bounded) is the figure: it grows with the log's size, since the
bounded read parses a fixed 6 MiB whatever the size.

    python benchmarks/one_engine_bounded.py [--mb 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ddpkit.doctor.log.scan import scan
from ddpkit.doctor.log.verdict import read_node, verdict

_REPORT = """Root Cause (first observed failure):
[0]:
  time      : 2026-12-04_10:30:14
  host      : node1
  rank      : 1 (local_rank: 0)
  exitcode  : 1 (pid: 4242)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""
_END = ('[rank1]: Traceback (most recent call last):\n'
        '[rank1]:   File "/job/train.py", line 8, in <module>\n'
        '[rank1]:     check()\n[rank1]: ValueError: batch 7 has 3 labels\n')


def _write(base: Path, megabytes: int) -> tuple[Path, Path]:
    run = base / "node1"
    rank = run / "torchrun" / "none_abc" / "attempt_0" / "0"
    rank.mkdir(parents=True)
    stderr = rank / "stderr.log"
    line = b"[rank1]: step 000123 loss 2.3456 lr 3.0e-04 tokens/s 123456 grad_norm 0.98\n"
    block = line * (1 << 14)
    with open(stderr, "wb") as handle:
        while handle.tell() < megabytes * 1_000_000:
            handle.write(block)
        handle.write(_END.encode())
    (rank / "stdout.log").write_text("")
    (run / "torchrun.log").write_text(_END + _REPORT)
    return run, stderr


def _best(rounds: int, work: Callable[[], None]) -> float:
    times = []
    for _unused in range(rounds):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run, stderr = _write(Path(tmp), args.mb)
        size = os.path.getsize(stderr) / 1e6

        def bounded() -> None:
            judged = verdict([read_node(str(run), 1)])
            assert judged.root is not None and judged.root.rank == 1

        def full() -> None:
            with open(stderr, "rb") as handle:
                for _event in scan(handle, str(stderr)):
                    pass

        fast, slow = _best(args.rounds, bounded), _best(args.rounds, full)
    print(f"rank log {size:.0f} MB: read_node + verdict {fast:.3f} s; full scan {slow:.3f} s; "
          f"full / bounded = {slow / fast:.1f}x")


if __name__ == "__main__":
    main()
