"""Inferences from the init sequence when no line names the cause (ddpkit.doctor.init_rules)."""

from __future__ import annotations

from pathlib import Path

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.logs import diagnose

SYSTEM_ERROR = ("RuntimeError: NCCL error in: /torch/lib/c10d/ProcessGroupNCCL.cpp:260, unhandled "
                "system error\n")


def run(tmp_path: Path, text: str) -> list[Finding]:
    path = tmp_path / "job.log"
    path.write_text(text)
    return diagnose([str(path)])


def comm(host: str, rank: int, nranks: int, phase: str = "") -> str:
    tail = f" - Init {phase}" if phase else ""
    return f"{host}:1:2 [{rank % 4}] NCCL INFO comm 0x7f1 rank {rank} nranks {nranks}{tail}\n"


def test_a_system_error_with_the_other_machines_ranks_absent_is_an_unreached_peer(
        tmp_path: Path) -> None:
    text = SYSTEM_ERROR + "".join(comm("gpu2", r, 8) for r in range(4))
    findings = run(tmp_path, text)
    assert (findings[0].id, findings[0].severity) == ("peer-unreachable", "error")
    assert "ranks 4, 5, 6, 7 never appear in this log" in findings[0].explanation
    assert "rank-failed" not in [f.id for f in findings]


def test_a_system_error_with_every_rank_present_stays_a_failed_rank(tmp_path: Path) -> None:
    text = SYSTEM_ERROR + "".join(comm("gpu2", r, 2) for r in range(2))
    assert [f.id for f in run(tmp_path, text)] == ["rank-failed"]


def test_a_system_error_with_two_machines_in_the_log_is_not_guessed(tmp_path: Path) -> None:
    text = SYSTEM_ERROR + comm("gpu2", 0, 4) + comm("gpu3", 2, 4)
    assert "peer-unreachable" not in [f.id for f in run(tmp_path, text)]


def test_init_hang_on_one_machine_with_several_gpus_points_at_p2p(tmp_path: Path) -> None:
    text = comm("box", 0, 2, "START") + comm("box", 1, 2, "START")
    (finding,) = run(tmp_path, text)
    assert (finding.id, finding.severity) == ("p2p", "warning")
    assert "a firewall cannot explain it" in finding.explanation


def test_init_hang_across_machines_stays_a_silent_drop(tmp_path: Path) -> None:
    text = comm("node-a", 0, 2, "START") + comm("node-b", 1, 2, "START")
    (finding,) = run(tmp_path, text)
    assert (finding.id, finding.severity) == ("firewall", "warning")
