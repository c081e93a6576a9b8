"""The shell's report of a crash (issue 24, doctor/log/rules/shell_signals.py): bash prints
strsignal()'s text for a job a fatal signal ended ("Segmentation fault (core dumped)",
"Aborted", "Bus error", "Floating point exception", "Illegal instruction"), alone, after a
script's "<script>: line N: <pid> " or as a job notification "[1]+  ...". The rank died of it;
what its peers report afterwards is a consequence. Real posted log: pytorch/pytorch#83912
(tests/fixtures/real-logs/pytorch_83912_gloo_send_to_self_segfault.log)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose

GLOO_RESET = ("terminate called after throwing an instance of 'gloo::IoException'\n"
              "  what():  [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error "
              "[127.0.0.1]:3977: Connection reset by peer")


def run(tmp_path: Path, lines: list[str]) -> list[Finding]:
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose([str(log)])


@pytest.mark.parametrize(("crash", "signal"), [
    ("Segmentation fault (core dumped)", "SIGSEGV"),
    ("[0]<stderr>:Illegal instruction", "SIGILL"),
    ("./train.sh: line 3: 4242 Segmentation fault      (core dumped) python train.py", "SIGSEGV"),
    ("[2]+  Floating point exception  python train.py", "SIGFPE"),
])
def test_a_crashed_rank_comes_before_the_connections_it_closed(tmp_path: Path, crash: str,
                                                               signal: str) -> None:
    lines = ["epoch 1 batch 0", crash, *("[1]<stderr>:" + x for x in GLOO_RESET.split("\n"))]
    findings = run(tmp_path, lines)
    top = findings[0]
    assert (top.id, top.severity) == ("rank-failed", "error"), [f.id for f in findings]
    assert f"died of {signal}" in top.explanation and "consequence" in top.explanation
    assert "PYTHONFAULTHANDLER=1" in top.fix
    assert top.evidence[0].line == 2
    if crash.startswith("[0]"):
        assert top.explanation.startswith("Rank 0 died of SIGILL")


# zsh's report (Src/jobs.c printjob, its messages from Src/signames2.awk): "zsh: " + the signal's
# message in lower case (+ " (core dumped)"), then the command
@pytest.mark.parametrize(("crash", "signal"), [
    ("zsh: segmentation fault (core dumped)  python train.py", "SIGSEGV"),
    ("zsh: illegal hardware instruction  torchrun --nproc_per_node 2 train.py", "SIGILL"),
    ("zsh: floating point exception  python train.py", "SIGFPE"),
])
def test_zshs_report_of_a_crash_is_a_crash(tmp_path: Path, crash: str, signal: str) -> None:
    lines = ["epoch 1 batch 0", crash, *("[1]<stderr>:" + x for x in GLOO_RESET.split("\n"))]
    (top, *_) = run(tmp_path, lines)
    assert top.id == "rank-failed" and f"died of {signal}" in top.explanation
    assert top.evidence[0].line == 2


def test_zshs_report_of_an_abort_alone_is_an_abort(tmp_path: Path) -> None:
    (top, *_) = run(tmp_path, ["step 3", "zsh: abort (core dumped)  python train.py"])
    assert top.id == "rank-failed" and "died of SIGABRT" in top.explanation
    assert "`abort (core dumped)`" in top.explanation


def test_zshs_report_of_a_kill_is_a_kill(tmp_path: Path) -> None:
    (top, *_) = run(tmp_path, ["Loading checkpoint shards: 50%", "zsh: killed     python train.py"])
    assert top.id == "out-of-memory" and "SIGKILL" in top.explanation


# glibc's checks that abort a process whose heap or stack is corrupt (malloc/malloc.c,
# malloc_printerr; debug/stack_chk_fail.c), each its message then abort()
@pytest.mark.parametrize("said", ["double free or corruption (!prev)",
                                  "free(): invalid pointer",
                                  "malloc(): corrupted top size",
                                  "*** stack smashing detected ***: terminated"])
def test_glibcs_abort_of_a_corrupt_process_is_an_abort(tmp_path: Path, said: str) -> None:
    (top, *_) = run(tmp_path, ["step 3", said])
    assert top.id == "rank-failed" and "died of SIGABRT" in top.explanation
    assert said in top.explanation and "memory corrupted" in top.fix


@pytest.mark.parametrize("text", ["zsh: command not found: torchrun",
                                  "see the zsh: killed jobs section of the manual"])
def test_zshs_other_words_are_no_crash(tmp_path: Path, text: str) -> None:
    assert {f.id for f in run(tmp_path, ["step 3", text])} & {"rank-failed", "out-of-memory"} == set()


def test_an_abort_alone_is_named_with_where_aborts_come_from(tmp_path: Path) -> None:
    (top, *_) = run(tmp_path, ["step 3", "Aborted (core dumped)"])
    assert top.id == "rank-failed" and "died of SIGABRT" in top.explanation
    assert "`Aborted (core dumped)`" in top.explanation
    assert "terminate called" in top.fix


def test_an_abort_after_std_terminate_leaves_the_cause_to_the_exception(tmp_path: Path) -> None:
    # std::terminate aborts: the exception it quotes is what failed, not the abort
    lines = ["terminate called after throwing an instance of 'gloo::IoException'",
             "  what():  [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:598] Read timeout "
             "[10.0.0.2]:7001", "Aborted (core dumped)"]
    (top, *_) = run(tmp_path, lines)
    assert top.id == "collective-timeout"
    assert "SIGABRT" not in top.explanation


@pytest.mark.parametrize("text", ["Aborted runs are retried by the scheduler",
                                  "Segmentation fault handler installed",
                                  "the Bus error counter is 0"])
def test_a_signal_name_inside_other_words_is_no_crash(tmp_path: Path, text: str) -> None:
    assert "rank-failed" not in [f.id for f in run(tmp_path, [text])]


# --- crash handlers in the process, and what a bus error means ---------------------------------------


def test_open_mpis_crash_handler_is_a_fatal_signal(tmp_path: Path) -> None:
    # opal/util/stacktrace.c: "[%s:%05d] *** Process received signal ***", "[%s:%05d] Signal: %s (%d)"
    lines = ["gpu1:405884:407462 [0] NCCL INFO RAS client listening socket at ::1<28028>",
             "[gpu1:405884] *** Process received signal ***",
             "[gpu1:405884] Signal: Segmentation fault (11)",
             "[gpu1:405884] Signal code: Address not mapped (1)"]
    (top, *_) = run(tmp_path, lines)
    assert top.id == "rank-failed" and "died of SIGSEGV" in top.explanation
    assert "*** Process received signal ***" in top.explanation and top.evidence[0].line == 2


def test_a_crash_handler_cut_before_its_signal_line_is_still_a_crash(tmp_path: Path) -> None:
    (top, *_) = run(tmp_path, ["[gpu1:405884] *** Process received signal ***"])
    assert top.id == "rank-failed" and "died of a fatal signal" in top.explanation


@pytest.mark.parametrize("crash", [
    "Bus error (core dumped)",  # bash
    "[8d6bf97c3bf4:3039 :0:3095] Caught signal 7 (Bus error: nonexistent physical address)",  # UCX
    "[gpu1:4242] Signal: Bus error (7)",  # Open MPI
])
def test_a_bus_error_is_shared_memory(tmp_path: Path, crash: str) -> None:
    (top, *_) = run(tmp_path, ["epoch 0 step 3", crash])
    assert (top.id, top.severity) == ("shm", "error")
    assert "died of SIGBUS" in top.explanation and "/dev/shm" in top.explanation
    assert "--shm-size" in top.fix


def test_torchruns_summary_of_a_rank_ended_by_sigbus_is_shared_memory(tmp_path: Path) -> None:
    # torch.distributed.elastic's error summary (multiprocessing/errors): exitcode -7, no error file
    lines = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
             "train.py FAILED", "Root Cause (first observed failure):", "[0]:",
             "  time      : 2023-04-14_06:35:35", "  host      : node1",
             "  rank      : 0 (local_rank: 0)", "  exitcode  : -7 (pid: 3111)",
             "  error_file: <N/A>", "  traceback : Signal 7 (SIGBUS) received by PID 3111"]
    findings = run(tmp_path, lines)
    assert findings[0].id == "shm", [f.id for f in findings]
    assert "SIGBUS" in findings[0].explanation
    assert "rank-failed" in [f.id for f in findings]  # the rank it ended, after its cause


def test_a_segfault_is_not_called_shared_memory(tmp_path: Path) -> None:
    assert "shm" not in [f.id for f in run(tmp_path, ["Segmentation fault (core dumped)"])]
