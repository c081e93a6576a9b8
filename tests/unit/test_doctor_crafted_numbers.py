"""A number no program prints, in a line that otherwise reads as a known one: no crash (int()
refuses more than 4300 digits, and converts fewer in quadratic time), and the line is not read
as that program's. Lines from the programs' templates: torchelastic's agent
(elastic/multiprocessing/api.py, "failed (exitcode: %d) local_rank: %d (pid: %d) of binary:
%s"), its error summary's "exitcode : %d (pid: %d)", nvidia-smi topo -m's matrix row, the NCCL
watchdog's "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=%d, ...)"."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.log.diagnose import diagnose

HUGE = "9" * 5000

LINES = [
    f"E0105 10:00:00.000000 4242 torch/distributed/elastic/multiprocessing/api.py:882] failed "
    f"(exitcode: {HUGE}) local_rank: 0 (pid: 4243) of binary: /usr/bin/python3",
    f"E0105 10:00:00.000000 4242 torch/distributed/elastic/multiprocessing/api.py:882] failed "
    f"(exitcode: 1) local_rank: {HUGE} (pid: 4243) of binary: /usr/bin/python3",
    f"  exitcode  : {HUGE} (pid: 4243)",
    f"GPU{HUGE}\t X \tNV12\tNV12\t0-63\t0\t\tN/A",
    f"[rank1]:[E105 10:00:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught "
    f"collective operation timeout: WorkNCCL(SeqNum={HUGE}, OpType=ALLREDUCE, NumelIn=1, "
    f"NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.",
]


@pytest.mark.parametrize("line", LINES, ids=range(len(LINES)))
def test_a_huge_number_in_a_known_line_is_no_crash(tmp_path: Path, line: str) -> None:
    log = tmp_path / "node.log"
    log.write_text(f"epoch 0 step 10 loss 2.31\n{line}\n")
    findings = diagnose([str(log)])
    assert findings  # an answer, whatever it is, and no exception
    assert all(HUGE not in f.explanation for f in findings)
