"""The quiet tail of a log (issue 24, doctor/log/quiet.py): a log whose anchored scan showed no
failure and no end has its last lines read whole, so a failure line no anchor catches, a stage
of another program, or a log ddpkit recognises nothing of, never ends in "no failure".

Failure lines are built from the message catalogue's templates (messages.json, from NCCL's
sources) with their placeholders filled; the other programs' lines follow the formats named in
quiet.py (NVSHMEM's error macros, systemd's status, bash's job report, nccl-tests' PRINTs,
Lightning's, Paddle's and the Hugging Face Trainer's log calls). Real posted logs of each kind
are in tests/fixtures/real-logs (nccl_1267, nccl_210, deepep_121, pytorch_129749, nccl_258,
nccltests_232, nccltests_27, lightning_19425, paddlefleetx_1054) and measured by
benchmarks/doctor_corpus.py.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log import quiet
from ddpkit.doctor.log import scan as logscan
from ddpkit.doctor.log.diagnose import diagnose
from ddpkit.doctor.log.messages import tolerant
from ddpkit.doctor.log.scan import Event, scan

MESSAGES = Path(__file__).resolve().parents[2] / "src" / "ddpkit" / "doctor" / "log" / \
    "messages.json"


def template(start: str) -> str:
    """The catalogued NCCL template that starts with ``start``."""
    messages = json.loads(MESSAGES.read_text())["messages"]
    found = [m["template"] for m in messages
             if m["source"] == "nccl" and m["template"].startswith(start)]
    assert found, start
    return str(found[0])


def run(tmp_path: Path, lines: list[str], name: str = "node.log") -> list[Finding]:
    log = tmp_path / name
    log.write_text("\n".join(lines) + "\n")
    return diagnose([str(log)])


def events(data: bytes) -> list[Event]:
    return list(scan(io.BytesIO(data), "x.log"))


# --- failure lines no anchor catches ---------------------------------------------------------------


def test_a_catalogued_error_with_an_empty_placeholder_and_collapsed_spaces(tmp_path: Path) -> None:
    # NCCL's "connecting to address %s with family %d ..." with an empty address, as posted
    line = template("ncclSocketInit: connecting to address <*> with family").replace(
        "address <*> with", "address with").replace("<*>", "0", 1).replace("<*>", "2", 1) \
        .replace("<*>", "10", 1)
    (top, *_) = run(tmp_path, ["epoch 1", line])
    assert top.severity == "error" and top.id == "internal-error"
    assert "src/misc/socket.cc" in top.explanation and "message catalogue" in top.explanation


def test_the_tolerant_matcher_takes_one_space_or_two_and_a_value() -> None:
    import re

    matcher = tolerant(r"address\ .*?\ with\ family")
    for text in ("address with family", "address  with family", "address 10.0.0.1<5> with family"):
        assert re.search(matcher, text), text
    assert not re.search(matcher, "addresswith family")


def test_nccl_warn_posted_without_its_host_prefix_or_nccl_word(tmp_path: Path) -> None:
    (top, *_) = run(tmp_path, ["include/socket.h:344 WARN Socket creation failed : Address "
                               "family not supported by protocol"])
    assert (top.id, top.severity) == ("unexplained-failure", "error")
    assert "Address family not supported" in top.evidence[0].text


@pytest.mark.parametrize("line", [
    # NVSHMEM's NZ error macro
    "/src/modules/bootstrap/uid/bootstrap_uid.cpp:499: non-zero status: -3 allgather failed",
    # systemctl status of a failed unit
    "     Active: failed (Result: exit-code) since Mon 2024-07-01 14:43:57 UTC; 5s ago",
])
def test_other_programs_failure_lines_are_failures(tmp_path: Path, line: str) -> None:
    (top, *_) = run(tmp_path, ["step 10 loss 0.31", line])
    assert top.severity == "error", (line, top.id)
    assert any(line.strip()[:30] in e.text for e in top.evidence)


def test_a_word_in_prose_is_no_failure_line(tmp_path: Path) -> None:
    # "Active: failed" only as systemctl prints it; "non-zero status" only after a source line or
    # as mpirun words it; THC's CUDA check only as it prints it, not its warning twin
    (top,) = run(tmp_path, ["the process exited with non-zero status: 1 (retried)",
                            "Inactive: failed over to the standby",
                            "THCudaCheckWarn FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp "
                            "line=202 error=1 : invalid argument"])
    assert top.severity != "error"


# --- stages and ends of other programs ---------------------------------------------------------------


NCCL_TESTS_TABLE = [
    "#  Rank  0 Group  0 Pid  11 on node1 device  0 [0x01] NVIDIA H100",
    "     8388608       2097152     float     sum      -1    101.2   82.89  145.06      0"
    "    100.9   83.14  145.50      0",
]


@pytest.mark.parametrize(("lines", "words"), [
    (NCCL_TESTS_TABLE[:1], "nccl-tests' table of ranks (line 1)"),
    (NCCL_TESTS_TABLE, "nccl-tests' results for size 8388608 B (line 2)"),
    (["GPU available: True (cuda), used: True", "TPU available: False, using: 0 TPU cores"],
     "PyTorch Lightning's setup (line 1)"),
    (["I0302 02:01:36.274989 31267 nccl_context.cc:83] init nccl context nranks: 4 local rank: "
      "0/1 gpu id: 0/1 ring id: 0/1"], "PaddlePaddle's NCCL context init (line 1)"),
    (["[Gloo] Rank 1 is connected to 1 peer ranks. Expected number of connected peer ranks is : 1"],
     "Gloo connected its ranks (line 1)"),
    # c10d's socket.cpp (C10D_INFO, torch 1.13 on), after c10's "[I socket.cpp:<line>] [c10d]"
    (["[I socket.cpp:725] [c10d] The client socket has connected to [10.0.0.1]:23456 on "
      "[node-1]:38244."], "a process reached the c10d store (line 1)"),
    (["[I1204 10:00:00.123000000 4242 socket.cpp:787] [c10d] The server socket has started to "
      "listen on [::]:29500."], "a process reached the c10d store (line 1)"),
    # (socket.cpp's formatSockAddr, torch 2.x, as a socket connects to a peer whose host name
    # does not resolve: C10D_WARNING "The hostname of the client socket cannot be retrieved.
    # err={}", getnameinfo's EAI_AGAIN here; a real run on the sim printed it alone, then hung)
    (["[W1207 11:40:43.662863479 socket.cpp:207] [c10d] The hostname of the client socket cannot "
      "be retrieved. err=-3"], "a process reached the c10d store (line 1)"),
    # torchrun's agent (elastic/agent/server/api.py, log.info("[%s] Rendezvous'ing worker
    # group", role)) and the c10d rendezvous (dynamic_rendezvous.py: "The node '%s' attempts to
    # join the next round of the rendezvous '%s'.")
    (["INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing worker group"],
     "torchrun's agent entered its rendezvous (line 1)"),
    (["[I1204 10:00:00,123] torch.distributed.elastic.rendezvous.dynamic_rendezvous: The node "
      "'node-1_4242_0' attempts to join the next round of the rendezvous 'job7'."],
     "torchrun's agent entered its rendezvous (line 1)"),
    # init_process_group's store-based barrier (distributed_c10d.py: "Added key: %s to store for
    # rank: %s")
    (["INFO:torch.distributed.distributed_c10d:Added key: store_based_barrier_key:1 to store for "
      "rank: 1"], "a rank entered init_process_group's store-based barrier (line 1)"),
])
def test_a_stage_without_an_end_is_no_result_naming_it(tmp_path: Path, lines: list[str],
                                                        words: str) -> None:
    (finding,) = run(tmp_path, lines)
    assert (finding.id, finding.severity) == ("no-result", "warning")
    assert finding.explanation.startswith("It stops after " + words)


@pytest.mark.parametrize("end", [
    "`Trainer.fit` stopped: `max_epochs=3` reached.",
    "INFO:lightning.pytorch.utilities.rank_zero:`Trainer.fit` stopped: `max_steps=100` reached.",
    "[INFO|trainer.py:2681] 2025-05-15 07:30:25,556 >> Training completed. Do not forget to share "
    "your model on huggingface.co/models =)",
])
def test_a_frameworks_end_of_training_is_no_failure(tmp_path: Path, end: str) -> None:
    (finding,) = run(tmp_path, ["GPU available: True (cuda), used: True", "epoch 0 loss 1.2", end])
    assert finding.id == "no-failure"
    assert "The run finished" in finding.explanation


# torch v2.4.0 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, ~ProcessGroupNCCL's
# TORCH_WARN_ONCE, behind c10's warning prefix "[W<MMDD> <time> ProcessGroupNCCL.cpp:<line>]
# Warning: " (and torchrun's "[rank0]:")
PG_NOT_DESTROYED = ("[rank{rank}]:[W602 08:42:46.129824551 ProcessGroupNCCL.cpp:{line}] Warning: "
                    "WARNING: process group has NOT been destroyed before we destruct "
                    "ProcessGroupNCCL. On normal program exit, the application should call "
                    "destroy_process_group to ensure that any pending NCCL operations have "
                    "finished in this process.")


# the same destructor's warning as later releases word it ("... ProcessGroupNCCL.cpp" as above;
# the source's comment: the destructor runs only as the whole program exits)
DESTROY_NOT_CALLED = ("[rank{rank}]:[W604 08:55:15.856186408 ProcessGroupNCCL.cpp:{line}] Warning: "
                      "WARNING: destroy_process_group() was not called before program exit, which "
                      "can leak resources. For more info, please see "
                      "https://pytorch.org/docs/stable/distributed.html#shutdown (function "
                      "operator())")


@pytest.mark.parametrize("template", [PG_NOT_DESTROYED, DESTROY_NOT_CALLED])
@pytest.mark.parametrize("rank,line", [(0, 1126), (1, 1250)])
def test_a_process_group_destructed_at_exit_is_no_failure(tmp_path: Path, template: str,
                                                          rank: int, line: int) -> None:
    (finding,) = run(tmp_path, ["GPU available: True (cuda), used: True", "epoch 0 loss 1.2",
                                template.format(rank=rank, line=line)])
    assert finding.id == "no-failure"


@pytest.mark.parametrize("template", [PG_NOT_DESTROYED, DESTROY_NOT_CALLED])
def test_a_process_group_destructed_after_a_failure_is_that_failure(tmp_path: Path,
                                                                    template: str) -> None:
    found = run(tmp_path, ["[rank0]: RuntimeError: CUDA error: an illegal memory access was "
                           "encountered", template.format(rank=0, line=1168)])
    assert found[0].id != "no-failure" and found[0].severity == "error"


def test_nccl_tests_summaries_of_separate_one_process_jobs(tmp_path: Path) -> None:
    summary = ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 3.94145 ", "#"]
    (top, *_) = run(tmp_path, [*summary, *summary])
    assert (top.id, top.severity) == ("rank-assignment", "warning")
    assert "2 times" in top.explanation and "MPI=1" in top.fix
    assert [e.line for e in top.evidence] == [2, 5]


def test_nccl_tests_runs_one_after_another_are_no_finding(tmp_path: Path) -> None:
    one = ["# Using devices", *NCCL_TESTS_TABLE, "# Avg bus bandwidth    : 145.06 "]
    assert [f.id for f in run(tmp_path, [*one, *one])] == ["no-failure"]


# --- what the quiet tail reads -----------------------------------------------------------------------


def test_the_log_read_event_counts_lines_and_recognised_ones() -> None:
    data = b"epoch 1\n" * 5 + b"GPU available: True (cuda), used: True\n"
    (read,) = [e for e in events(data) if e.kind == "log-read"]
    assert read.data == {"lines": "6", "read": "6", "recognised": "1"}


def test_no_quiet_tail_once_the_scan_saw_a_failure_or_an_end() -> None:
    failed = b"epoch 1\nRuntimeError: boom\nActive: failed (Result: exit-code)\n"
    assert [e.kind for e in events(failed) if e.kind in ("log-read", "failure-line")] == []
    ended = b"Active: failed (Result: signal)\nall 2 nodes finished successfully\n"
    assert "log-read" not in [e.kind for e in events(ended)]


def test_line_numbers_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logscan, "CHUNK_BYTES", 64)
    lines = [f"filler line {i} with some words" for i in range(300)]
    lines[149] = "/src/host/topo/topo.cpp:526: non-zero status: -3 allgather of ipc handles failed"
    (found,) = [e for e in events(("\n".join(lines)).encode()) if e.kind == "failure-line"]
    assert found.line == 150


def test_only_the_last_lines_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quiet, "QUIET_LINES", 50)
    lines = ["Active: failed (Result: exit-code)", *[f"step {i}" for i in range(200)]]
    found = events(("\n".join(lines) + "\n").encode())
    assert "failure-line" not in [e.kind for e in found]  # line 1: before the last 50
    (read,) = [e for e in found if e.kind == "log-read"]
    assert (read.data["lines"], read.data["read"]) == ("201", "50")


def test_a_line_an_anchor_read_is_not_read_again() -> None:
    # NCCL's own WARN (an anchored event) is not counted twice by the quiet tail
    data = b"gpu1:1:1 [0] NCCL INFO Bootstrap : Using eth1:10.0.0.2<0>\n"
    found = events(data)
    (read,) = [e for e in found if e.kind == "log-read"]
    assert read.data == {"lines": "1", "read": "0", "recognised": "1"}


def test_a_log_read_by_head_and_tail_has_one_quiet_tail_with_the_whole_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # launch's bounded reading (doctor/log/verdict.py) reads a big log's head and tail apart:
    # the head's last lines are not the log's, and the count is the whole log's
    from ddpkit.doctor.log import verdict

    monkeypatch.setattr(verdict, "HEAD_BYTES", 4096)
    monkeypatch.setattr(verdict, "TAIL_BYTES", 4096)
    lines = [f"step {i} loss 0.{i % 97}" for i in range(5000)]
    # near the end of the head: the head has no quiet tail of its own
    lines[200] = "Active: failed (Result: exit-code)"
    log = tmp_path / "rank.log"
    log.write_text("\n".join(lines) + "\n")
    with open(log, "rb") as handle:
        found = list(verdict._bounded_scan(handle, str(log)))
    assert [e.kind for e in found] == ["log-read"]
    assert found[0].data["lines"] == "5000" and found[0].line == 5000
    # the log's last line, unknown, numbered in the whole log
    assert found[0].data["last_line"] == "5000" and found[0].data["last_text"] == lines[-1]


# --- nvidia-smi topo -m: a table about the machine, not a run's line ---------------------------------

TOPO_PCIE = ["\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity",
             "GPU0\t X \tPXB\tSYS\tSYS\t0-27,56-83\t0", "GPU1\tPXB\t X \tSYS\tSYS\t0-27,56-83\t0",
             "GPU2\tSYS\tSYS\t X \tPIX\t28-55,84-111\t1", "GPU3\tSYS\tSYS\tPIX\t X \t28-55,84-111\t1"]
TOPO_NVLINK = ["        GPU0    GPU1    CPU Affinity    NUMA Affinity",
               "GPU0     X      NV12    0-63            0", "GPU1    NV12     X      0-63            0"]


def test_a_topology_alone_names_the_pcie_pairs_and_the_p2p_test(tmp_path: Path) -> None:
    (finding,) = run(tmp_path, TOPO_PCIE)
    assert (finding.id, finding.severity) == ("no-result", "warning")
    assert "nvidia-smi's GPU topology" in finding.explanation
    assert "GPU0-GPU1 (PXB), GPU2-GPU3 (PIX)" in finding.explanation  # SYS pairs: no P2P
    assert "NCCL_P2P_DISABLE=1" in finding.fix and "ACS" in finding.fix


def test_a_topology_of_nvlinks_gives_no_pcie_advice(tmp_path: Path) -> None:
    (finding,) = run(tmp_path, TOPO_NVLINK)
    assert finding.id == "no-result" and "nvidia-smi's GPU topology" in finding.explanation
    assert "NCCL_P2P_DISABLE" not in finding.fix


def test_a_topology_beside_a_finished_run_changes_nothing(tmp_path: Path) -> None:
    lines = [*TOPO_PCIE, "# Avg bus bandwidth    : 22.1 "]
    assert [f.id for f in run(tmp_path, lines)] == ["no-failure"]


def test_a_log_read_event_from_the_wire_with_bad_counts_is_read_as_none() -> None:
    # a node's reading arrives as JSON (doctor/log/verdict.NodeLogs): counts are read, not trusted
    from ddpkit.doctor.log.rules.table import Diagnosis

    diagnosis = Diagnosis()
    for data in ({"lines": "x", "recognised": "1e9"}, {"lines": "-3"},
                 {"gpu": "GPU0", "links": "X PXB"}):
        kind = "gpu-topology" if "gpu" in data else "log-read"
        diagnosis.feed(Event(kind, "n0.log", 1, "", None, None, None, data))
    (finding,) = diagnosis.findings()
    assert finding.id == "no-result" and "The log is empty" in finding.explanation


def test_a_warning_level_line_the_catalogue_files_under_a_cause_is_that_cause_as_a_warning(
        tmp_path: Path) -> None:
    # torch's c10d socket.cpp, C10D_WARNING("The server socket on {} has timed out, will
    # retry.", ...): the store's server waiting for connections, again and again
    messages = json.loads(MESSAGES.read_text())["messages"]
    (line,) = {m["template"] for m in messages if m["template"].startswith(
        "The server socket on <*> has timed out")}
    said = line.replace("<*>", "[::ffff:10.4.6.125]:63617")
    (top, *_) = run(tmp_path, [said, said, said])
    assert (top.id, top.severity) == ("peer-unreachable", "warning")
    assert "printed at warning level" in top.explanation and "3 times" in top.explanation


def test_a_warning_level_benign_line_stays_no_failure(tmp_path: Path) -> None:
    (top, *_) = run(tmp_path, ["step 10 loss 0.31", "UserWarning: this overload of add_ is "
                               "deprecated"])
    assert top.id in ("no-failure", "no-result") and top.severity != "error"


# --- where the log ends ------------------------------------------------------------------------------

WARNED = ("/x/site-packages/torch/distributed/distributed_c10d.py:4631: UserWarning: "
          "torch.distributed.reduce_op is deprecated, please use torch.distributed.ReduceOp "
          "instead")


def test_a_log_ending_on_a_line_ddpkit_does_not_know_is_no_result_quoting_it(
        tmp_path: Path) -> None:
    """A failed run's log ends with its failure, in the words of whatever failed: a log whose
    last line ddpkit does not know, after known lines and nothing failing, is no-result."""
    (top, *_) = run(tmp_path, [WARNED, "step 10 loss 0.31", "frobnicator state 7: giving up"])
    assert (top.id, top.severity) == ("no-result", "warning")
    assert "line 3" in top.explanation
    assert [e.line for e in top.evidence] == [3]


def test_a_log_ending_on_a_known_line_is_no_failure(tmp_path: Path) -> None:
    (top, *_) = run(tmp_path, ["step 10 loss 0.31", WARNED])
    assert (top.id, top.severity) == ("no-failure", "info")


def test_a_warnings_source_line_continues_it(tmp_path: Path) -> None:
    """Python's warnings print the warning, then its source line indented (warnings.formatwarning:
    "%s:%s: %s: %s\\n" and "  %s\\n"): that line is the known warning's, not an unknown end."""
    (top, *_) = run(tmp_path, ["step 10 loss 0.31", WARNED,
                               '  warnings.warn("torch.distributed.reduce_op is deprecated, "'])
    assert (top.id, top.severity) == ("no-failure", "info")


# colour codes a terminal-minded logger writes (SGR, "\x1b[33m" ... "\x1b[0m"), and the UTF-8
# byte-order mark that Windows editors and PowerShell's Out-File -Encoding utf8 write first
COLOUR, RESET, BOM = "\x1b[33m", "\x1b[0m", "\ufeff"


@pytest.mark.parametrize("colour", [True, False])
def test_a_coloured_warnings_source_line_continues_it(tmp_path: Path, colour: bool) -> None:
    lines = ["step 10 loss 0.31", COLOUR + WARNED + RESET,
             (RESET if colour else "") + '  warnings.warn("torch.distributed.reduce_op is '
             'deprecated, "']
    (top, *_) = run(tmp_path, lines)
    assert (top.id, top.severity) == ("no-failure", "info")


@pytest.mark.parametrize(("lines", "expected"), [
    ([WARNED], ("no-failure", "info")), (["step 10 loss 0.31", WARNED], ("no-failure", "info")),
    # (an exception raised without a message: its name alone from the line's start)
    (["AssertionError"], ("rank-failed", "error"))])
def test_a_byte_order_mark_before_the_first_line_changes_nothing(
        tmp_path: Path, lines: list[str], expected: tuple[str, str]) -> None:
    plain_top = run(tmp_path, lines, "plain.log")[0]
    (top, *_) = run(tmp_path, [BOM + lines[0], *lines[1:]], "bom.log")
    assert (top.id, top.severity) == (plain_top.id, plain_top.severity) == expected
    assert BOM not in top.explanation and all(BOM not in e.text for e in top.evidence)


CUT_TRACEBACK = ["Traceback (most recent call last):",
                 '  File "train.py", line 9, in <module>',
                 "    trainer.train()",
                 '  File "/x/site-packages/ultralytics/engine/trainer.py", line 206, in train',
                 "    raise e"]


@pytest.mark.parametrize("after", [[], ["gpu1:4242:4250 [0] NCCL INFO CC Off, workFifoBytes "
                                        "1048576"]])
def test_a_traceback_without_its_exception_line_is_an_unread_failure(tmp_path: Path,
                                                                     after: list[str]) -> None:
    """CPython's report of an exception begins "Traceback (most recent call last):" and ends with
    the exception's line; a paste that lost that line still shows that a process failed."""
    (top, *_) = run(tmp_path, ["step 10 loss 0.31", *CUT_TRACEBACK, *after])
    assert (top.id, top.severity) == ("unexplained-failure", "warning")
    assert "line 2" in top.explanation and [e.line for e in top.evidence] == [2]


def test_a_traceback_with_its_exception_line_is_that_exception(tmp_path: Path) -> None:
    (top, *_) = run(tmp_path, [*CUT_TRACEBACK, "RuntimeError: CUDA error: an illegal memory "
                                               "access was encountered"])
    assert top.id == "cuda-error" and "exception line is not" not in top.explanation


# DeepSpeed v0.19.5 deepspeed/launcher/launch.py, main: logger.info(f"nnodes={args.nnodes},
# num_local_procs={num_local_procs}, node_rank={args.node_rank}") and, for each process that
# ends with 0, logger.info(f"Process {process.pid} exits successfully.")
DS_HEAD = "[2024-05-01 10:00:00,000] [INFO] [launch.py:158:main] nnodes=1, num_local_procs=2, node_rank=0"
DS_DONE = "[2024-05-01 10:09:00,000] [INFO] [launch.py:285:main] Process {pid} exits successfully."


def test_deepspeeds_launcher_with_every_process_done_is_a_run_that_finished(tmp_path: Path) -> None:
    log = tmp_path / "ds.log"
    log.write_text("\n".join([DS_HEAD, "step 100 loss 0.3", DS_DONE.format(pid=11),
                              DS_DONE.format(pid=12)]) + "\n")
    assert [(f.id, f.severity) for f in diagnose([str(log)])] == [("no-failure", "info")]
    log.write_text("\n".join([DS_HEAD, "step 100 loss 0.3", DS_DONE.format(pid=11)]) + "\n")
    assert [f.id for f in diagnose([str(log)])] == ["no-result"]  # (the other may still run)
