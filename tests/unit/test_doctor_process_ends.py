"""How a process's end reads, from the printing programs' own formats: an exception Python printed
without a message, DeepSpeed's launcher reporting a worker's non-zero exit, ProcessGroupNCCL's
own shutdown reported by its watchdog, and c10's backtrace after a message."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose
from ddpkit.doctor.log.prefixes import raised


def run(tmp_path: Path, lines: list[str]) -> list[Finding]:
    log = tmp_path / "node.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose([str(log)])


# Lib/traceback.py, format_exception_only: where str() of the exception is empty ("raise
# NotImplementedError", a bare ``assert``) the line is the type's name alone, after the line's
# prefixes: torchrun's rank tag, logging's asctime, Ray's worker tag, pytest's fail marker
BARE = ["AssertionError", "[rank1]: AssertionError", "2025-03-02 23:36:25,443 NotImplementedError",
        "(RayTrainWorker pid=4242, ip=10.0.0.7) AssertionError", "E   AssertionError",
        "[default0]:torch.distributed.DistBackendError", "MyTrainerException"]


@pytest.mark.parametrize("line", BARE)
def test_an_exception_raised_without_a_message_is_raised(line: str) -> None:
    assert raised(line)


@pytest.mark.parametrize("line", ["Error", "ERROR", "KeyboardInterrupt", "no AssertionError here",
                                  "AssertionError was expected", "  self.assertRaises(ValueError)"])
def test_a_name_in_prose_or_no_exception_type_is_not(line: str) -> None:
    assert not raised(line)


@pytest.mark.parametrize("line", BARE[:4])
def test_a_rank_that_ends_in_a_bare_assert_failed(tmp_path: Path, line: str) -> None:
    lines = ["Traceback (most recent call last):", '  File "train.py", line 12, in <module>',
             "    assert flash_attn_available", line]
    top, *_ = run(tmp_path, ["epoch 0 step 10 loss 2.31", *lines])
    assert (top.id, top.severity) == ("rank-failed", "error")
    name = line.rsplit(" ", 1)[-1].rsplit("]:", 1)[-1]
    assert f"{name}." in top.explanation and f"{name}:" not in top.explanation
    assert top.evidence[0].line == 5


# format_exception_only's f"{stype}: {value}" where the message starts with a line break: the
# type and ": " alone on the line, the message below (torch/multiprocessing/spawn.py,
# ProcessRaisedException: "\n\n-- Process %d terminated with the following error:\n" and the
# child's traceback), and a copy whose trailing space was trimmed
SPAWN = "torch.multiprocessing.spawn.ProcessRaisedException"
_CHILD = ["", "-- Process 1 terminated with the following error:",
          "Traceback (most recent call last):", '  File "train.py", line 20, in training',
          "    item = next(iter(dl))", "KeyError: 'labels'"]


@pytest.mark.parametrize("head", [f"{SPAWN}: ", f"{SPAWN}:", f"E       {SPAWN}:  ",
                                  f"[rank0]: {SPAWN}: "])
def test_an_exception_whose_message_starts_on_the_next_line_is_raised(head: str) -> None:
    assert raised(head)


@pytest.mark.parametrize("trailing", [" ", ""])
def test_a_spawned_process_s_failure_reads_without_a_dangling_colon(tmp_path: Path,
                                                                    trailing: str) -> None:
    lines = ["Traceback (most recent call last):", '  File "main.py", line 40, in <module>',
             "    mp.spawn(training, nprocs=2)", f"{SPAWN}:{trailing}", *_CHILD]
    top, *_ = run(tmp_path, lines)
    assert top.severity == "error" and top.id != "no-failure"
    assert f"{SPAWN}:." not in top.explanation


def test_the_spawned_failure_reads_the_same_with_its_trailing_space_or_without(
        tmp_path: Path) -> None:
    # (pytest's report of it, its child's traceback cut before its exception line)
    found = []
    for trailing in (" ", ""):
        lines = [f"E       {SPAWN}:{trailing}", "E",
                 "E       -- Process 5 terminated with the following error:",
                 "E       Traceback (most recent call last):",
                 'E         File "/x/site-packages/torch/multiprocessing/spawn.py", line 69, in '
                 "_wrap", "E           fn(i, *args)"]
        top, *_ = run(tmp_path, lines)
        found.append((top.id, top.severity))
    assert found[0] == found[1] and found[0][1] == "error"


@pytest.mark.parametrize("line", ["no RuntimeError:", "we saw a ValueError:", "RuntimeError:x"])
def test_a_colon_ended_name_inside_prose_is_not_raised(line: str) -> None:
    assert not raised(line)


# DeepSpeed's launcher (deepspeed/launcher/launch.py, sigkill_handler): logger.error(f"{cmd} exits
# with return code = {last_return_code}") once a worker exited non-zero, in DeepSpeed's logging
# format "[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] %(message)s"
def _deepspeed(code: int) -> str:
    return (f"[2026-01-05 10:00:00,000] [ERROR] [launch.py:341:sigkill_handler] "
            f"['/usr/bin/python3', '-u', 'finetune.py', '--local_rank=3'] exits with return code "
            f"= {code}")


# ProcessGroupNCCL's destructor at the worker's exit (c10's TORCH_WARN format, glog's "[W" header
# with torchrun's rank tag): a line the scan reads as the end of a run
_NOT_DESTROYED = ("[rank3]:[W105 10:00:00.000000000 ProcessGroupNCCL.cpp:1250] Warning: WARNING: "
                  "destroy_process_group() was not called before program exit, which can leak "
                  "resources. For more info, please see "
                  "https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())")


@pytest.mark.parametrize("at_exit", [[], [_NOT_DESTROYED]])
@pytest.mark.parametrize("code", [1, 2, 134])
def test_deepspeed_reporting_a_worker_s_non_zero_exit_is_a_failure(
        tmp_path: Path, code: int, at_exit: list[str]) -> None:
    lines = ["[2026-01-05 09:59:00,000] [INFO] [launch.py:272:main] process 812 spawned with "
             "command: ['/usr/bin/python3', '-u', 'finetune.py', '--local_rank=3']", *at_exit,
             "[2026-01-05 10:00:00,000] [INFO] [launch.py:335:sigkill_handler] Killing subprocess "
             "812", _deepspeed(code)]
    top, *_ = run(tmp_path, lines)
    assert top.severity == "error" and top.id != "no-failure"
    assert len(lines) in [e.line for e in top.evidence]


def test_deepspeed_s_workers_exiting_cleanly_are_no_failure(tmp_path: Path) -> None:
    lines = [f"[2026-01-05 10:00:00,000] [INFO] [launch.py:367:main] Process {pid} exits "
             "successfully." for pid in (812, 813)]
    findings = run(tmp_path, lines)
    assert "error" not in [f.severity for f in findings]


# ProcessGroupNCCL's shutdown aborts its communicators with the reason "Process Group shutdown on
# rank %d"; checkForNCCLErrorsInternal reports a communicator's reason after "NCCL communicator
# encountered error set by ProcessGroupNCCL: ", and the watchdog logs what it found at info level
# (glog's "I" header), c10's backtrace after it ("Exception raised from %s at %s:%d (most recent
# call first):", then "frame #%d: ..." lines, c10/util/Backtrace.cpp)
def _shutdown(rank: int) -> list[str]:
    return [f"I0105 10:00:01.000123 4242 ProcessGroupNCCL.cpp:{500 + rank}] [Rank {rank}] found "
            "async exception when checking for NCCL errors: NCCL communicator encountered error "
            f"set by ProcessGroupNCCL: Process Group shutdown on rank {rank}",
            "Exception raised from checkForNCCLErrorsInternal at "
            "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1800 (most recent call first):",
            "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 "
            "(0x7f00aa000000 in /usr/lib/python3/dist-packages/torch/lib/libc10.so)",
            "frame #1: <unknown function> + 0x11f3d (0x7f00ab000000 in "
            "/usr/lib/python3/dist-packages/torch/lib/libtorch_cuda.so)"]


@pytest.mark.parametrize("rank", [0, 3, 15])
def test_the_process_group_s_own_shutdown_is_no_failure(tmp_path: Path, rank: int) -> None:
    top, *_ = run(tmp_path, ["epoch 9 done, saving the final checkpoint", *_shutdown(rank)])
    assert (top.id, top.severity) == ("no-failure", "info")
    assert "shut down" in top.explanation and "InfiniBand" not in top.explanation


def test_a_failure_before_the_shutdown_keeps_its_finding(tmp_path: Path) -> None:
    before = ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
              "KeyError: 'labels'"]
    top, *_ = run(tmp_path, [*before, *_shutdown(1)])
    assert top.severity == "error" and top.id != "no-failure"


def test_a_log_ending_in_a_backtrace_ends_on_the_message_before_it(tmp_path: Path) -> None:
    # the message nothing recognises (line 2) is the log's last words, not a frame of its stack
    lines = ["epoch 0 step 10 loss 2.31", "widget frobnication went sideways on shard 7",
             *_shutdown(0)[1:]]
    top, *_ = run(tmp_path, lines)
    assert (top.id, top.severity) == ("no-result", "warning")
    assert [e.line for e in top.evidence] == [2]
