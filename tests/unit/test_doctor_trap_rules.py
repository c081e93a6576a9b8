"""Trap addresses read from the init sequence without the usual error line, and failures real
logs post bare (issue 12): Gloo on loopback, a socket transport spread over unreachable
interfaces, a bare duplicate-GPU, driver or name-resolution line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose

FALLBACK = ("[rank1]:[W806 14:25:27.6 ProcessGroupGloo.cpp:524] Warning: Unable to resolve hostname "
            "to a (local) address. Using the loopback address as fallback. Manually set the network "
            "interface to bind to with GLOO_SOCKET_IFNAME. (function operator())\n")


def run(tmp_path: Path, text: str) -> list[Finding]:
    log = tmp_path / "run.log"
    log.write_text(text)
    return diagnose([str(log)])


def test_gloo_loopback_fallback_alone_on_one_machine_is_no_failure(tmp_path: Path) -> None:
    assert [f.id for f in run(tmp_path, FALLBACK)] == ["no-failure"]


def test_gloo_loopback_fallback_then_refused_is_a_wrong_interface(tmp_path: Path) -> None:
    (finding,) = run(tmp_path, FALLBACK + "RuntimeError: Gloo connectFullMesh failed with "
                     "[pair.cc:144] timed out connecting: SO_ERROR: Connection refused,\n")
    assert (finding.id, finding.severity) == ("wrong-interface", "error")
    assert "fell back to loopback" in finding.explanation
    assert "GLOO_SOCKET_IFNAME" in finding.fix


def test_gloo_mesh_refused_on_loopback_is_a_wrong_interface(tmp_path: Path) -> None:
    (finding,) = run(tmp_path, "RuntimeError: Gloo connectFullMesh failed with [pair.cc:152]\n"
                     "  timed out connecting: SO_ERROR: Connection refused, remote=[127.0.0.1]:9\n")
    assert (finding.id, finding.severity) == ("wrong-interface", "error")
    assert "127.0.0.1" in finding.explanation


SOCKET_LIST = ("h:1:1 [0] NCCL INFO NET/Socket : Using\n[0]bond0:192.168.1.161<0>\n"
               "[1]br-05ab815fa14e:172.19.0.1<0>\n[2]veth6163fba:fe80::b878:6cff:fe52:abe2%veth6163fba<0>\n")


def test_a_socket_list_posted_one_interface_per_line_is_read(tmp_path: Path) -> None:
    (finding,) = run(tmp_path, SOCKET_LIST)
    assert (finding.id, finding.severity) == ("wrong-interface", "warning")
    assert "3 interfaces" in finding.explanation and "br-05ab815fa14e" in finding.explanation
    assert "NCCL_SOCKET_IFNAME==bond0" in finding.fix


def test_a_mixed_socket_list_on_a_single_node_is_no_alarm(tmp_path: Path) -> None:
    single = ("h:1:2 [0] NCCL INFO comm 0x5 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 "
              "MNNVL 0\n")
    assert [f.id for f in run(tmp_path, SOCKET_LIST + single)] == ["no-result"]  # no trap


def test_a_routable_only_socket_list_is_no_alarm(tmp_path: Path) -> None:
    text = "h:1:1 [0] NCCL INFO NET/Socket : Using [0]ib0:192.168.1.11<0> [1]eth0:10.1.0.11<0>\n"
    assert [f.id for f in run(tmp_path, text)] == ["no-result"]  # no trap; stops at bootstrap


def test_bare_failure_lines_real_logs_post(tmp_path: Path) -> None:
    cases = {
        "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 50\n": "duplicate-gpu",
        "CUDA driver version is insufficient for CUDA runtime version\n": "version-mismatch",
        "Error: Rank -1 received an Exception. Detailed message: host not found: Name or service "
        "not known\n": "rendezvous-config",
    }
    for text, expected in cases.items():
        assert run(tmp_path, text)[0].id == expected, text


def test_a_sigkill_no_rank_explained_is_named_as_the_oom_killer(tmp_path: Path) -> None:
    text = ("E0101 00:00:00.000000 1 torch/distributed/elastic/multiprocessing/api.py:833] failed "
            "(exitcode: -9) local_rank: 0 (pid: 5343) of binary: /usr/bin/python\n")
    findings = run(tmp_path, text)
    assert [f.id for f in findings] == ["out-of-memory", "rank-failed"]
    assert "SIGKILL" in findings[0].explanation and "dmesg" in findings[0].fix


def test_an_init_hang_says_where_each_machine_stopped_and_who_is_missing(tmp_path: Path) -> None:
    text = ("a:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
            "a:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 3 cudaDev 0 busId 1000 - Init START\n"
            "b:2:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"
            "b:2:2 [0] NCCL INFO comm 0x2 rank 1 nranks 3 cudaDev 0 busId 1000 - Init START\n")
    (finding,) = run(tmp_path, text)
    assert (finding.id, finding.severity) == ("firewall", "warning")
    assert "NCCL init hangs" in finding.explanation
    assert "a stopped after init started (rank 0)" in finding.explanation
    assert "Rank 2 of 3 never reached init" in finding.explanation


def test_srun_and_pdsh_labels_before_an_nccl_line_are_read() -> None:
    from ddpkit.doctor.log.prefixes import parse_prefix

    assert parse_prefix("52: ip-0A0C04E3:76285:76947 [4] NCCL WARN x") == ("ip-0A0C04E3", None, 52)
    assert parse_prefix("104.171.201.172: lambda-scalar03:148966:148966 [0] NCCL INFO x") == (
        "lambda-scalar03", "104.171.201.172", None)
    assert parse_prefix("RuntimeError: NCCL error in: x") == (None, None, None)
    assert parse_prefix("91: I0207 07:09:26.591536 47744 loader.cc:67] x") == (None, None, None)


OOB = ("node3:2331:2666 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; "
       "OOB ibp75s0:192.168.0.103<0>\n")
BOOTSTRAP_TRAIL = ("node3:2330:2658 [2] NCCL INFO misc/socket.cc:567 -> 2\n"
                   "node3:2330:2658 [2] NCCL INFO misc/socket.cc:618 -> 2\n"
                   "node3:2330:2658 [2] NCCL INFO bootstrap.cc:270 -> 2\n")


def test_a_bootstrap_return_code_trail_without_a_warn_is_a_wrong_interface(tmp_path: Path) -> None:
    (finding,) = run(tmp_path, OOB + BOOTSTRAP_TRAIL)
    assert (finding.id, finding.severity) == ("wrong-interface", "error")
    assert "return code 2 traced through bootstrap.cc" in finding.explanation
    assert "ibp75s0:192.168.0.103 (IPoIB)" in finding.explanation
    assert "NCCL_SOCKET_IFNAME==" in finding.fix


def test_a_bootstrap_trail_behind_a_warn_is_left_to_the_warn(tmp_path: Path) -> None:
    warn = "node3:2330:2658 [2] misc/socket.cc:100 NCCL WARN Bootstrap : no socket interface found\n"
    findings = run(tmp_path, warn + BOOTSTRAP_TRAIL)
    assert findings[0].id == "interface-not-found"
    assert "wrong-interface" not in [f.id for f in findings]


def test_the_oob_interface_alone_is_no_failure(tmp_path: Path) -> None:
    assert [f.id for f in run(tmp_path, OOB)] == ["no-failure"]


def test_the_watchdog_stack_alone_is_a_collective_timeout(tmp_path: Path) -> None:
    frames = ("frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono"
              "::duration<long, std::ratio<1l, 1000l> > >) + 0x1d2 (0x1554e9e0f8f2 in libtorch_cuda.so)\n"
              "Exception raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/"
              "ProcessGroupNCCL.cpp:1521 (most recent call first):\n")
    (finding,) = run(tmp_path, frames)
    assert finding.id == "collective-timeout"
    assert "Only the NCCL watchdog's stack" in finding.explanation


@pytest.mark.parametrize("cut", ["", " b", " both on CU"])
def test_nccls_duplicate_gpu_line_cut_after_its_ranks_is_read(tmp_path: Path, cut: str) -> None:
    # NCCL's init.cc: "Duplicate GPU detected : rank %d and rank %d both on CUDA device %x", after
    # torch's "Last error:", cut where a terminal or a paste stopped: the ranks say it; no device
    # is made up
    text = ("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, internal error, NCCL version "
            f"2.14.3\nncclInternalError: Internal check failed.\nLast error:\nDuplicate GPU "
            f"detected : rank 5 and rank 0{cut}\n")
    top = run(tmp_path, text)[0]
    assert (top.id, top.severity) == ("duplicate-gpu", "error")
    assert "Ranks 5 and 0 are on the same CUDA device." in top.explanation
