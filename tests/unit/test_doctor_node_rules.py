"""Machines compared side by side (ddpkit.doctor.log.rules.nodes, issue 12): NCCL versions, transports,
net plugins and torch builds that differ between the ranks of one log or between log files."""

from __future__ import annotations

from pathlib import Path

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose


def run(tmp_path: Path, **files: str) -> list[Finding]:
    paths = []
    for name, text in files.items():
        path = tmp_path / f"{name}.log"
        path.write_text(text)
        paths.append(str(path))
    return diagnose(paths)


def comm(host: str, rank: int, phase: str = "START") -> str:
    return (f"{host}:1:2 [0] NCCL INFO comm 0x55d1 rank {rank} nranks 2 cudaDev 0 nvmlDev 0 "
            f"busId 1000 commId 0x77 - Init {phase}\n")


def test_one_log_two_hosts_on_different_transports_is_the_cause_of_the_hang(tmp_path: Path) -> None:
    text = ("gpu-a:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
            "gpu-a:1:2 [0] NCCL INFO Using network IB\n" + comm("gpu-a", 0) +
            "gpu-b:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"
            "gpu-b:1:2 [0] NCCL INFO Using network Socket\n" + comm("gpu-b", 1))
    findings = run(tmp_path, job=text)
    assert (findings[0].id, findings[0].severity) == ("node-mismatch", "error")
    assert "gpu-a: IB; gpu-b: Socket" in findings[0].explanation
    assert "NCCL init hangs: gpu-a stopped after init started" in findings[0].explanation


def test_transports_before_nccl_2_5_are_compared_across_files(tmp_path: Path) -> None:
    findings = run(tmp_path,
                   node0="n0:1:1 [0] NCCL INFO Using internal Network IB\nNCCL version 2.3.5\n",
                   node1="n1:1:1 [0] NCCL INFO Using internal Network Socket\nNCCL version 2.3.5\n")
    assert [f.id for f in findings] == ["node-mismatch"]
    assert "n0: IB; n1: Socket" in findings[0].explanation


def test_different_net_plugins_explain_a_hang(tmp_path: Path) -> None:
    a = ("h100-1:1:2 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal "
         "network plugin.\n" + comm("h100-1", 0))
    b = ("h100-2:1:2 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal "
         "network plugin.\n"
         "h100-2:1:2 [0] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/"
         "libnccl-net.so\n" + comm("h100-2", 1))
    findings = run(tmp_path, a=a, b=b)
    assert (findings[0].id, findings[0].severity) == ("node-mismatch", "error")
    explanation = findings[0].explanation
    assert "h100-1: the internal one (no net plugin); h100-2: /opt/hpcx/" in explanation


def test_a_plugin_difference_alone_is_not_reported(tmp_path: Path) -> None:
    # Plugin lines are informational: with every communicator complete, nothing is reported
    # (the answer is where the lines stop, after init: no-result, issue 24).
    a = ("h1:1:2 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal "
         "implementation\n" + comm("h1", 0, "COMPLETE"))
    b = "h2:1:2 [0] NCCL INFO NET/Plugin: Loaded net plugin FastSocket (v4)\n" + comm("h2", 1,
                                                                                  "COMPLETE")
    assert [(f.id, f.severity) for f in run(tmp_path, a=a, b=b)] == [("no-result", "warning")]


def test_nccl_versions_differ_between_hosts_of_one_log(tmp_path: Path) -> None:
    text = ("vm-0:1:1 [0] NCCL INFO NCCL version 2.18.1+cuda12.1\n" + comm("vm-0", 0) +
            "vm-1:1:1 [0] NCCL INFO NCCL version 2.14.3+cuda11.7\n" + comm("vm-1", 1))
    findings = run(tmp_path, job=text)
    assert (findings[0].id, findings[0].severity) == ("version-mismatch", "error")
    assert "2.14.3 on vm-1; 2.18.1 on vm-0" in findings[0].explanation


def test_torch_builds_differ_between_files(tmp_path: Path) -> None:
    failed = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1333, unhandled system error\n"
    findings = run(tmp_path,
                   node0="PyTorch version: 2.1.0+cu121\n[pip3] torch==2.1.0+cu121\n" + failed,
                   node1="PyTorch version: 2.0.1+cu117\n[pip3] torchaudio==2.1.0\n")
    assert (findings[0].id, findings[0].severity) == ("version-mismatch", "error")
    assert "2.0.1+cu117 on node1.log; 2.1.0+cu121 on node0.log" in findings[0].explanation


def test_torch_builds_that_differ_without_a_failure_are_a_warning(tmp_path: Path) -> None:
    findings = run(tmp_path, node0="PyTorch version: 2.1.0\n", node1="torch==2.0.1\n")
    assert [(f.id, f.severity) for f in findings] == [("version-mismatch", "warning")]


def test_the_same_torch_and_nccl_everywhere_is_quiet(tmp_path: Path) -> None:
    same = "PyTorch version: 2.4.0+cu121\nNCCL version 2.20.5+cuda12.4\n"
    findings = run(tmp_path, node0=same + comm("a", 0, "COMPLETE"),
                   node1=same + comm("b", 1, "COMPLETE"))
    assert [f.id for f in findings] == ["no-result"]  # no version finding; no end marker


def test_torchaudio_and_torchvision_pins_are_not_the_torch_build(tmp_path: Path) -> None:
    findings = run(tmp_path, node0="[pip3] torch==2.4.0\n[pip3] torchvision==0.19.0\n",
                   node1="[pip3] torch==2.4.0\n[pip3] torchaudio==2.4.1\n")
    # (no run's line at all: no-failure or, as the logs end on lines no program of a run
    # prints, no-result; never a version mismatch)
    assert [f.id for f in findings] in (["no-failure"], ["no-result"])
    assert all(f.severity != "error" for f in findings)
