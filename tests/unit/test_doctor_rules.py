"""Every finding id on a fixture: NCCL-format logs written from NCCL's message formats, the seed
page's real block, and torch/Gloo/torchrun output captured for real (tests/fixtures/logs/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.catalogue import CATALOGUE
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
NCCL, CAPTURED, MIXED = LOGS / "nccl", LOGS / "captured", LOGS / "mixed"


def run(*paths: Path) -> list[Finding]:
    return diagnose([str(p) for p in paths])


def ids(findings: list[Finding]) -> list[str]:
    return [f.id for f in findings]


# (fixture files, the finding expected first, a phrase its explanation must contain)
CASES = [
    ((NCCL / "seed_connection_refused.log",), "wrong-interface", "eth0:172.17.0.4"),
    ((NCCL / "wrong_interface_node0.log", NCCL / "wrong_interface_node1.log"), "wrong-interface",
     "certain"),
    ((MIXED / "launcher_prefixes.log",), "wrong-interface", "2 different machines"),
    ((NCCL / "interface_not_found.log",), "interface-not-found", "NCCL_SOCKET_IFNAME=eht1"),
    ((CAPTURED / "torchrun_gloo_ifname_missing.log",), "interface-not-found", "'nosuch0'"),
    ((NCCL / "container_network.log",), "container-network", "172.17.0.3"),
    ((NCCL / "firewall.log",), "firewall", "10.0.0.2 (port 39017) timed out"),
    ((CAPTURED / "store_client_no_master.log",), "peer-unreachable", "127.0.0.1"),
    ((NCCL / "shm.log",), "shm", "/dev/shm/nccl-JCU0PF"),
    ((CAPTURED / "torchrun_port_in_use.log",), "port-in-use", "is already in use"),
    ((MIXED / "flattened_traceback.log",), "port-in-use", "29500 is torchrun's default"),
    ((CAPTURED / "store_waiting_for_clients.log",), "rendezvous-timeout", "Only 1 of 2"),
    ((CAPTURED / "torchrun_bad_rdzv_endpoint.log",), "rendezvous-config", "'10.0.0.1:abc'"),
    ((CAPTURED / "env_master_addr_unset.log",), "rendezvous-config", "needs MASTER_ADDR in the environment"),
    ((NCCL / "duplicate_gpu.log",), "duplicate-gpu", "Ranks 1 and 0"),
    ((NCCL / "rank_assignment.log",), "rank-assignment", "world size: 2 (on n1), 4 (on n0)"),
    ((NCCL / "version_mismatch_node0.log", NCCL / "version_mismatch_node1.log"),
     "version-mismatch", "2.14.3 on vm-1; 2.18.1 on vm-0"),
    ((NCCL / "ib_error.log",), "ib-error", "memlock limit"),
    ((NCCL / "p2p.log",), "p2p", "peer access is not supported"),
    ((NCCL / "collective_timeout.log",), "collective-timeout", "Rank 1 never completed it"),
    ((CAPTURED / "torchrun_gloo_hang.log",), "collective-timeout", "Rank 1 never completed it"),
    ((CAPTURED / "torchrun_rank_sigkill.log",), "rank-failed", "Rank 1 (local rank 1"),
    ((MIXED / "flattened_summary.log",), "rank-failed", "Rank 5 (local rank 1, on node3, pid 4242)"
     " was killed by SIGSEGV"),
    ((NCCL / "out_of_memory.log",), "out-of-memory", "Out of GPU memory (rank 3)"),
    ((NCCL / "connection_lost.log",), "connection-lost", "peer w0:48125"),
    ((NCCL / "benign.log",), "no-failure", "Only benign lines"),
]


@pytest.mark.parametrize(("files", "first", "phrase"), CASES,
                         ids=[f"{c[1]}:{c[0][0].name}" for c in CASES])
def test_fixture_names_its_cause_first(files: tuple[Path, ...], first: str, phrase: str) -> None:
    findings = run(*files)
    assert findings[0].id == first, ids(findings)
    assert phrase in findings[0].explanation
    if first != "no-failure":
        assert findings[0].evidence, "a finding without evidence"
        for item in findings[0].evidence:
            assert Path(item.file).name in {f.name for f in files}
            lines = Path(item.file).read_text(errors="replace").splitlines()
            assert item.text.rstrip("…") in lines[item.line - 1]


def test_every_catalogue_id_is_covered_by_a_fixture_case() -> None:
    covered = {case[1] for case in CASES} | {"node-mismatch"}  # node-mismatch: test below
    covered |= {"local-rank-argument"}  # tests/unit/test_doctor_local_rank.py
    covered |= {"job-hung"}  # a stacks directory, not a log: tests/unit/test_doctor_stacks.py
    covered |= {"dump-unreadable"}  # a flight-recorder dump: tests/unit/test_doctor_dump_bombs.py
    # real torchrun logs: tests/unit/test_doctor_unexplained.py
    covered |= {"stopped-while-waiting", "unexplained-failure"}
    covered |= {"no-result"}  # synthetic lines from catalogued templates: test_doctor_run_end.py
    # read from the sources' result codes and raise sites: tests/unit/test_message_mapping.py
    covered |= {"invalid-usage", "internal-error", "cuda-error"}
    assert covered == set(CATALOGUE)


def test_seed_page_block_names_the_fix() -> None:
    (finding,) = run(NCCL / "seed_connection_refused.log")
    assert finding.severity == "error"
    assert "ddpkit nccl-conf set NCCL_SOCKET_IFNAME==eth1" in finding.fix
    assert "export NCCL_SOCKET_IFNAME==eth1" in finding.fix
    assert "ddpkit nics --to" in finding.fix
    lines = {e.line for e in finding.evidence}
    assert 1 in lines and 11 in lines  # the bootstrap line and a refused connect


def test_correlation_across_files_uses_both_files() -> None:
    findings = run(NCCL / "wrong_interface_node0.log", NCCL / "wrong_interface_node1.log")
    assert ids(findings) == ["wrong-interface"]
    files = {Path(e.file).name for e in findings[0].evidence}
    assert files == {"wrong_interface_node0.log", "wrong_interface_node1.log"}
    assert "NCCL_SOCKET_IFNAME==eth1" in findings[0].fix


def test_one_node_alone_is_only_a_warning() -> None:
    (finding,) = run(NCCL / "wrong_interface_node0.log")
    assert (finding.id, finding.severity) == ("wrong-interface", "warning")


def test_per_node_interface_names_get_per_node_fixes() -> None:
    (finding,) = run(MIXED / "launcher_prefixes.log")
    assert "on gpu-a: export NCCL_SOCKET_IFNAME==ens5" in finding.fix
    assert "on gpu-b: export NCCL_SOCKET_IFNAME==ens6" in finding.fix


def test_node_mismatch_shows_transport_and_env_side_by_side() -> None:
    findings = run(NCCL / "node_mismatch_node0.log", NCCL / "node_mismatch_node1.log")
    assert ids(findings) == ["node-mismatch"]
    assert findings[0].severity == "warning"
    assert "ib-node-0: IB; ib-node-1: Socket" in findings[0].explanation
    assert "NCCL_IB_DISABLE: ib-node-0=(unset), ib-node-1=1" in findings[0].explanation


def test_identical_hostnames_on_different_machines(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("gpu:1:1 [0] NCCL INFO NET/Socket : Using [0]eth1:10.0.0.2<0>\n")
    b.write_text("gpu:2:2 [0] NCCL INFO NET/Socket : Using [0]eth1:10.0.0.3<0>\n")
    (finding,) = run(a, b)
    assert finding.id == "node-mismatch"
    assert "share the hostname gpu" in finding.explanation


def test_killed_rank_comes_before_its_consequences() -> None:
    assert ids(run(CAPTURED / "torchrun_rank_sigkill.log")) == ["rank-failed", "connection-lost"]


def test_oom_comes_before_the_rank_it_took_down() -> None:
    assert ids(run(NCCL / "out_of_memory.log")) == ["out-of-memory", "rank-failed"]


def test_single_node_watchdog_suggests_p2p_as_a_warning() -> None:
    findings = run(NCCL / "collective_timeout.log")
    assert [(f.id, f.severity) for f in findings] == [("collective-timeout", "error"),
                                                      ("p2p", "warning")]
    assert "ALLREDUCE (SeqNum 5)" in findings[0].explanation


def test_benign_lines_alone_are_exactly_no_failure() -> None:
    findings = run(NCCL / "benign.log")
    assert [(f.id, f.severity) for f in findings] == [("no-failure", "info")]
    texts = " ".join(e.text for e in findings[0].evidence)
    for benign in ("No plugin found", "Failed to open libibverbs", "NET/IB : No device found"):
        assert benign in texts


def test_an_empty_log_is_no_result_not_no_failure(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    (finding,) = run(empty)
    assert (finding.id, finding.severity) == ("no-result", "warning")
    assert "The log is empty" in finding.explanation


def test_a_routable_refused_address_is_not_called_a_wrong_interface(tmp_path: Path) -> None:
    log = tmp_path / "n1.log"
    log.write_text(
        "n1:1:1 [0] NCCL INFO Bootstrap : Using eth1:10.0.0.3<0>\n"
        "n1:1:2 [0] NCCL INFO socketPollConnect: connect to 10.0.0.2<5000> returned Connection "
        "refused, retrying (1/34) after sleep for 100 msec\n"
    )
    (finding,) = run(log)
    assert finding.id == "peer-unreachable"
    assert "10.0.0.2" in finding.explanation


def test_gloo_loopback_remote_in_a_multi_node_log_is_a_wrong_interface(tmp_path: Path) -> None:
    log = tmp_path / "gloo.log"
    log.write_text(
        "[node0:0] [rank0]: RuntimeError: Gloo connectFullMesh failed with [pair.cc:144] timed "
        "out connecting: SO_ERROR: Connection refused, remote=[127.0.1.1]:2966\n"
        "[node1:0] [rank1]: RuntimeError: [unbound_buffer.cc:78] Timed out waiting 30000ms for "
        "recv operation to complete\n"
    )
    finding, *rest = run(log)
    assert finding.id == "wrong-interface"
    assert ids(rest) == ["collective-timeout"]
    assert "GLOO_SOCKET_IFNAME" in finding.explanation


def test_evidence_per_finding_is_bounded(tmp_path: Path) -> None:
    line = ("n1:1:2 [0] NCCL INFO socketPollConnect: connect to 10.0.0.2<5000> returned Connection "
            "timed out, retrying\n")
    log = tmp_path / "many.log"
    log.write_text(line * 50_000)
    (finding,) = run(log)
    assert finding.id == "firewall"
    assert "50000 connection attempts" in finding.explanation
    assert len(finding.evidence) <= 6


def test_an_uncaught_application_error_is_a_rank_failure(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text('Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
                   "    cfg['lr']\nKeyError: 'lr'\n")
    (finding,) = run(log)
    assert finding.id == "rank-failed"
    assert "uncaught KeyError: 'lr'" in finding.explanation


@pytest.mark.parametrize("stamp", ["2024-10-11T20:10:11.640910986Z ",  # kubectl/docker logs -t
                                   "2024-10-11 20:10:11,640 ", "[2024-10-11 20:10:11] "])
def test_an_uncaught_error_after_a_time_stamp_is_a_rank_failure(tmp_path: Path,
                                                                  stamp: str) -> None:
    # `kubectl logs --timestamps` and `docker logs --timestamps` put an RFC 3339 time (with
    # nanoseconds) before every line, logging's asctime its own
    log = tmp_path / "pod.log"
    for tag in ("[rank1]: ", ""):  # (torchrun's tag, or the stamp alone before the line)
        log.write_text(f"{stamp}{tag}    run_id = wandb.run.id\n"
                       f"{stamp}{tag}AttributeError: 'NoneType' object has no attribute 'id'\n")
        (finding,) = run(log)
        assert finding.id == "rank-failed", tag
        assert "uncaught AttributeError" in finding.explanation


def test_a_modules_class_named_just_error_is_an_exception(tmp_path: Path) -> None:
    # format_exception_only prints the qualified name: wandb raises its errors.Error so
    log = tmp_path / "rank.log"
    log.write_text('Traceback (most recent call last):\n'
                   '  File "/x/site-packages/wandb/sdk/lib/preinit.py", line 36, in wrapper\n'
                   '    raise wandb.Error(f"You must call wandb.init() before {name}()")\n'
                   "wandb.errors.Error: You must call wandb.init() before wandb.log()\n")
    (finding,) = run(log)
    assert finding.id == "rank-failed"
    assert "uncaught wandb.errors.Error: You must call" in finding.explanation
    log.write_text("Error: no such option --foo\n")  # a program's own word, not a class
    assert "uncaught" not in run(log)[0].explanation


def test_torch_s_nccl_detail_line_is_named_whole_not_as_python_s_systemerror(
        tmp_path: Path) -> None:
    # torch's NCCLUtils.cpp detail line after an NCCL error names NCCL's result
    # ("ncclSystemError: System call (e.g. socket, malloc) or external library call failed or
    # device error."), not Python's SystemError
    log = tmp_path / "rank.log"
    log.write_text("terminate called after throwing an instance of 'std::runtime_error'\n"
                   "ncclSystemError: System call (e.g. socket, malloc) or external library call "
                   "failed or device error.\n")
    (finding, *_) = run(log)
    assert "ncclSystemError: System call" in finding.explanation
    assert "uncaught SystemError" not in finding.explanation


def test_an_error_word_inside_ordinary_output_is_not_a_failure(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("epoch 3 mean squared error 0.12 (no ValueError: seen)\nvalidation error 0.3\n")
    # no failure is claimed; an exception's name in the middle of a line may be a quote or a
    # raise after a prefix ddpkit does not know, so no "no failure" either
    (finding,) = run(log)
    assert (finding.id, finding.severity) == ("no-result", "warning")


def test_an_nccl_tests_failure_line_is_a_failed_rank_not_a_clean_run(tmp_path: Path) -> None:
    log = tmp_path / "nccltests.log"
    log.write_text("# Using devices\n#  Rank  0 Group  0 Pid 11 on node1 device  0 [0x01] GPU\n"
                   "node1: Test NCCL failure common.cu:777 'unhandled cuda error'\n"
                   " .. node1 pid 11: Test failure common.cu:844\n")
    (finding,) = run(log)
    assert (finding.id, finding.severity) == ("rank-failed", "error")
    assert "NCCL error: unhandled cuda error" in finding.explanation
    assert "NCCL_DEBUG=INFO" in finding.fix


def test_a_healthy_nccl_tests_run_stays_clean(tmp_path: Path) -> None:
    log = tmp_path / "nccltests.log"
    log.write_text("# Using devices\n#  Rank  0 Group  0 Pid 11 on node1 device  0 [0x01] GPU\n"
                   "     8388608       2097152     float     sum      -1    101.2   82.89  145.06"
                   "      0\n#  Out of bounds values : 0 OK\n# Avg bus bandwidth    : 145.06\n")
    assert ids(run(log)) == ["no-failure"]


def test_a_truncated_nccl_tests_failure_line_is_not_read(tmp_path: Path) -> None:
    log = tmp_path / "nccltests.log"
    log.write_text("node1: Test NCCL failure common.cu:7")  # cut before its quoted error
    assert ids(run(log)) == ["no-result"]  # no finding read into it; no "no failure" either


@pytest.mark.parametrize("words", ["Connection reset by peer", "Broken pipe",
                                   "Transport endpoint is not connected"])
def test_a_connection_gone_mid_run_is_connection_lost(tmp_path: Path, words: str) -> None:
    """strerror() of ECONNRESET, EPIPE and ENOTCONN, as C++'s std::system_error carries them out
    of Gloo's pair ("terminate called after throwing an instance of 'std::system_error'" and its
    "  what():  <strerror>", libstdc++'s verbose terminate handler)."""
    log = tmp_path / "rank.log"
    log.write_text("terminate called after throwing an instance of 'std::system_error'\n"
                   f"  what():  {words}\n")
    assert run(log)[0].id == "connection-lost"


@pytest.mark.parametrize("tail", [" (pid: 4242) of binary: /usr/bin/python3", ""])
def test_the_agents_failed_line_cut_after_the_local_rank_still_names_the_rank(
        tmp_path: Path, tail: str) -> None:
    """torchelastic's agent (elastic/multiprocessing/api.py, torch 1.9 on): "failed (exitcode: %d)
    local_rank: %d (pid: %d) of binary: %s", through Python logging's default format; a paste
    may stop after the local rank."""
    log = tmp_path / "rank.log"
    log.write_text("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -11) "
                   f"local_rank: 0{tail}\ntorch.distributed.elastic.multiprocessing.errors."
                   "ChildFailedError\n")
    (found, *_) = run(log)
    assert found.id == "rank-failed" and "SIGSEGV" in found.explanation
