"""Inferences from the init sequence when no line names the cause (ddpkit.doctor.log.rules.init_phase)."""

from __future__ import annotations

from pathlib import Path

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose

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


# NCCL 2.4 to 2.11 print no ``Init START``: the tree layout is what shows that init had started.
def old_init(host: str, version: str = "2.11.4+cuda11.1") -> str:
    return (f"NCCL version {version}\n"
            f"{host}:1:2 [0] NCCL INFO Channel 00/02 :    0   1\n"
            f"{host}:1:3 [1] NCCL INFO Trees [0] -1/-1/-1->1->0 [1] 0/-1/-1->1->-1\n"
            f"{host}:1:2 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] -1/-1/-1->0->1\n")


def nccl_tests_table(*hosts: str) -> str:
    """nccl-tests' device table (its newer form also has a ``Group`` column)."""
    return "# Using devices\n" + "".join(
        f"#   Rank  {rank} Pid  26327 on {host:>10} device  {rank} [0xc1] NVIDIA RTX A6000\n"
        for rank, host in enumerate(hosts))


def test_old_release_tree_layout_without_completion_on_one_machine_points_at_p2p(
        tmp_path: Path) -> None:
    text = nccl_tests_table("box", "box") + old_init("box")
    (finding,) = run(tmp_path, text)
    assert (finding.id, finding.severity) == ("p2p", "warning")
    assert "box stopped after init started" in finding.explanation
    assert any("Rank  1 Pid" in e.text for e in finding.evidence)
    assert any("Trees [0]" in e.text for e in finding.evidence)


def test_old_release_tree_layout_across_machines_stays_a_silent_drop(tmp_path: Path) -> None:
    text = old_init("node-a") + "node-b:3:4 [0] NCCL INFO Using network Socket\n"
    (finding,) = run(tmp_path, text)
    assert (finding.id, finding.severity) == ("firewall", "warning")


def test_a_tree_layout_is_no_hang_once_init_completed(tmp_path: Path) -> None:
    table = nccl_tests_table("box", "box")
    done = "box:1:2 [0] NCCL INFO comm 0x7f1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
    assert [f.id for f in run(tmp_path, table + old_init("box") + done)] == ["no-result"]


def test_a_tree_layout_is_not_read_without_a_release_that_prints_init_complete(
        tmp_path: Path) -> None:
    table = nccl_tests_table("box", "box")
    no_version = "".join(old_init("box").splitlines(keepends=True)[1:])
    # no hang is read (the answer is where the lines stop: nccl-tests' table, issue 24)
    assert [f.id for f in run(tmp_path, table + no_version)] == ["no-result"]
    assert [f.id for f in run(tmp_path, table + old_init("box", "2.3.7+cuda9.2"))] == [
        "no-result"]


def test_ring_and_connection_lines_alone_are_not_read_as_init_started(tmp_path: Path) -> None:
    text = ("NCCL version 2.11.4+cuda11.1\n"
            "box:1:2 [0] NCCL INFO Channel 00/02 :    0   1\n"
            "box:1:2 [0] NCCL INFO Channel 00/0 : 0[c1000] -> 1[c2000] via P2P/IPC\n"
            "box:1:2 [0] NCCL INFO Ring 00 : 0[0] -> 1[1] via P2P/IPC\n")
    # (no init hang is read from them; the log stops after a stage of NCCL's init: no-result)
    found = run(tmp_path, text)
    assert [(f.id, f.severity) for f in found] == [("no-result", "warning")]
    assert "rings within the machine" in found[0].explanation


def test_a_table_that_places_only_some_ranks_is_not_one_machine(tmp_path: Path) -> None:
    # ranks 0 and 2 on "box": rank 1 could run anywhere
    text = ("# Using devices\n"
            "#   Rank  0 Pid  26327 on box device  0 [0xc1] NVIDIA RTX A6000\n"
            "#   Rank  2 Pid  26327 on box device  1 [0xc2] NVIDIA RTX A6000\n"
            + old_init("box"))
    assert "p2p" not in [f.id for f in run(tmp_path, text)]


def test_the_newer_table_form_places_ranks_too(tmp_path: Path) -> None:
    table = ("# Using devices\n"
             "#  Rank  0 Group  0 Pid 3740409 on        box device  0 [0x01] NVIDIA RTX A6000\n"
             "#  Rank  1 Group  0 Pid 3740409 on        box device  1 [0x07] NVIDIA RTX A6000\n")
    (finding,) = run(tmp_path, table + old_init("box"))
    assert finding.id == "p2p"
