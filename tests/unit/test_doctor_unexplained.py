"""Never "no failure" on a failed run (issue 24): unexplained-failure and stopped-while-waiting.

The i24_torchrun_* fixtures are real torchrun output (torch 2.13, Gloo, two "nodes" on 127.0.0.1),
produced by tests/integration/test_doctor_two_node_capture.py (REFRESH_DOCTOR_CAPTURES=1).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose
from ddpkit.doctor.log.messages import catalogue

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "captured"


def run(*paths: Path) -> list[Finding]:
    return diagnose([str(p) for p in paths])


def write(tmp_path: Path, text: str) -> Path:
    log = tmp_path / "node.log"
    log.write_text(text)
    return log


def test_master_killed_while_waiting_is_stopped_while_waiting() -> None:
    log = CAPTURED / "i24_torchrun_master_killed_waiting.log"
    findings = run(log)
    top = findings[0]
    assert top.id == "stopped-while-waiting" and top.severity == "error"
    assert "no-failure" not in {f.id for f in findings}
    assert "signal 15" in top.explanation and "waited in the rendezvous" in top.explanation
    assert "other nodes' logs" in top.fix and "--debug" in top.fix
    # the decisive line is the death signal (line 2); torchrun's own traceback after it is its
    # consequence, not a failure of its own
    assert [e.line for e in top.evidence] == [2]
    assert "Received 15 death signal" in top.evidence[0].text


def test_a_failure_before_the_stop_is_not_a_wait(tmp_path: Path) -> None:
    text = (CAPTURED / "i24_torchrun_master_killed_waiting.log").read_text()
    first, rest = text.split("\n", 1)
    log = write(tmp_path, first + "\nterminate called after throwing an instance of "
                "'c10::Error'\n" + rest)
    (top, *_) = run(log)
    assert top.id == "unexplained-failure"
    assert [e.line for e in top.evidence] == [2]


def test_a_failed_job_keeps_its_specific_finding() -> None:
    findings = run(CAPTURED / "i24_torchrun_rank_fails_node1.log")
    assert findings[0].id == "rank-failed"
    assert "ValueError: bad value in batch 3" in findings[0].explanation
    both = run(CAPTURED / "i24_torchrun_rank_fails_node0.log",
               CAPTURED / "i24_torchrun_rank_fails_node1.log")
    assert {f.id for f in both} >= {"rank-failed"}
    assert "unexplained-failure" not in {f.id for f in both}


def test_a_successful_jobs_bare_output_is_no_result_not_a_failure() -> None:
    # torchrun prints nothing of its own on success: the script's two lines per node are all
    findings = run(CAPTURED / "i24_torchrun_ok_node0.log", CAPTURED / "i24_torchrun_ok_node1.log")
    assert [(f.id, f.severity) for f in findings] == [("no-result", "warning")]
    assert "none of the 4 lines of these 2 logs" in findings[0].explanation


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("step 10 loss 0.3\nFatal Python error: Segmentation fault\n", "Fatal Python error"),
        ("step 10\nterminate called after throwing an instance of 'std::runtime_error'\n",
         "terminate called"),
        ("h1:10:11 [0] NCCL WARN Call to ioctl failed : Operation not permitted\n", "Call to"),
        ("srun: error: node7: task 3: Exited with exit code 1\n", "exit code 1"),
        ("2024-01-01 ERROR:root:worker 3 lost its data shard\n", "worker 3 lost"),
        # Python logging's highest level in its default format, "%(levelname)s:%(name)s:%(message)s"
        ("CRITICAL:trainer:shard 3 is missing\n", "shard 3 is missing"),
        ("2024-01-01 12:00:00 - FATAL - shard 3 is missing\n", "shard 3 is missing"),
        # torch's C++ error-level log record (glog's header; ProcessGroupGloo.cpp's
        # monitoredBarrier: "Rank %d successfully reached monitoredBarrier, but received errors
        # while waiting for send/recv from rank %d. Please check rank %d logs for faulty rank.")
        ("[E ProcessGroupGloo.cpp:138] Rank 0 successfully reached monitoredBarrier, but received "
         "errors while waiting for send/recv from rank 1. Please check rank 1 logs for faulty "
         "rank.\n", "monitoredBarrier"),
        ("[E1204 09:50:12.118000 123 torch/csrc/distributed/c10d/ProcessGroupGloo.cpp:138] Rank 0 "
         "successfully reached monitoredBarrier\n", "monitoredBarrier"),
        # (after torchrun's tee and torch's excepthook tags)
        ("[default0]:[rank0]:[E1204 09:50:12.118000 123 ProcessGroupGloo.cpp:138] Rank 0 "
         "successfully reached monitoredBarrier\n", "monitoredBarrier"),
        # libstdc++'s verbose terminate handler (vterminate.cc) with no exception in flight
        ("step 10\nterminate called without an active exception\n", "without an active"),
        # (ncclUnhandledCudaError's text is cuda-error's: causes/unhandled_cuda.py)
        ("glog: Check failed: result == ncclSuccess (3 vs. 0)  internal error\n",
         "Check failed"),
    ],
)
def test_failure_lines_no_rule_names_are_unexplained_failure(
        tmp_path: Path, text: str, quoted: str) -> None:
    (top, *_) = run(write(tmp_path, text))
    assert top.id == "unexplained-failure" and top.severity == "error"
    assert any(quoted in e.text for e in top.evidence)
    assert "other nodes' logs" in top.fix and "ddpkit doctor --nnodes" in top.fix


@pytest.mark.parametrize(
    "text",
    [
        "[rank1]: Traceback (most recent call last):\n[rank1]: KeyError: 'labels'\n",
        "OSError: [Errno 28] No space left on device: '/ckpt/step10.pt'\n",
        "[rank0]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:444] "
        "Write timeout [10.0.0.2]:7001\n",
        # a type named ...Exception, as format_exception_only prints its qualified name, alone
        # on the posted line: no "Error" anywhere in it
        "mypkg.runtime.utils.ShardLayoutException: the shards were saved by 4 ranks, not 8\n",
        "[rank3]: Exception: stopping: step 12 has no batch\n",
    ],
)
def test_an_exception_is_never_no_failure(tmp_path: Path, text: str) -> None:
    (top, *_) = run(write(tmp_path, text))
    assert top.severity == "error"


def test_a_catalogued_line_gets_the_finding_the_catalogue_files_it_under(tmp_path: Path) -> None:
    # NCCL's socket.cc gives up connecting: no rule reads the line, the catalogue says who prints
    # it, since which release, and what kind of failure it is
    log = write(tmp_path, "h1:10:11 [0] NCCL WARN socketPollConnect: exceeded retries (35)\n")
    (top, *_) = run(log)
    assert top.id == "peer-unreachable" and top.severity == "error"
    assert "nccl src/misc/socket.cc, v2." in top.explanation
    assert [e.line for e in top.evidence] == [1]


def test_a_catalogued_line_with_no_cause_of_its_own_stays_unexplained(tmp_path: Path) -> None:
    # SYSCHECK's WARN (checks.h) returns ncclSystemError for any system call: the call and its
    # errno are in the line, and no finding names them all
    log = write(tmp_path, "h1:10:11 [0] NCCL WARN Call to ioctl failed : Operation not permitted\n")
    (top, *_) = run(log)
    assert top.id == "unexplained-failure"
    assert "nccl src/include/checks.h" in top.explanation


def _template(source: str, file: str, start: str) -> str:
    """The catalogued template ``file`` of ``source`` prints that starts with ``start``, its
    placeholders filled with 7."""
    found = [m.template for m in catalogue().messages
             if m.source == source and m.file == file and m.template.startswith(start)]
    assert found, (source, file, start)
    return found[0].replace("<*>", "7")


def test_a_refusal_torch_s_python_code_raises_gets_the_call_s_fix_not_nccl_s(
        tmp_path: Path) -> None:
    # FSDP's own check of the module it was given (torch/distributed/fsdp/_init_utils.py): the
    # catalogue files a ValueError under invalid-usage, and NCCL's variables have nothing to do
    # with it
    text = _template("torch", "torch/distributed/fsdp/_init_utils.py",
                     "The module has CPU parameters or buffers")
    (top, *_) = run(write(tmp_path, f"ValueError: {text}\n"))
    assert top.id == "invalid-usage" and top.severity == "error"
    assert "torch's Python code checked what it was given" in top.explanation
    assert "NCCL_" not in top.explanation and "nccl-conf" not in top.fix
    assert "the call the traceback ends in" in top.fix


def test_a_setting_nccl_refuses_keeps_the_nccl_fix(tmp_path: Path) -> None:
    # NCCL's init.cc refuses a communicator config value: the NCCL words stay
    text = _template("nccl", "src/init.cc", "Invalid config blocking attribute value")
    (top, *_) = run(write(tmp_path, f"h1:10:11 [0] NCCL WARN {text}\n"))
    assert top.id == "invalid-usage"
    assert "torch's Python code" not in top.explanation and "nccl-conf" in top.fix


@pytest.mark.parametrize(
    "text",
    [
        "epoch 3 validation error 0.12 (no ValueError: seen)\n",
        "exit code 0\nall ranks finished\n",
        # the level's word inside other words is no level
        "loss is not CRITICALLY high; NONFATAL_RETRIES=3\n",
        # the other levels of the same records, and a store closing under a client at the end
        "[W ProcessGroupGloo.cpp:138] Rank 0 reached monitoredBarrier\n",
        "[E TCPStore.cpp:1000] recvValue failed on SocketImpl(fd=3) - connection reset\n",
        "W1204 09:36:50.110000 1 torch/distributed/run.py:766] Setting OMP_NUM_THREADS "
        "environment variable for each process to be 1 in default\n",
    ],
)
def test_ordinary_output_is_no_failure_line(tmp_path: Path, text: str) -> None:
    # none of these lines is a failure; the first names an exception in prose (a quote, or a
    # raise after a prefix ddpkit does not know), the others are lines ddpkit does not know: no
    # claim either way
    (finding,) = run(write(tmp_path, text))
    assert (finding.id, finding.severity) == ("no-result", "warning")


def test_a_scheduler_cancel_after_silence_is_a_wait(tmp_path: Path) -> None:
    log = write(tmp_path, "rank 0 initialised\nslurmstepd: error: *** JOB 4242 ON gpu3 CANCELLED AT "
                          "2024-05-01T10:00:00 DUE TO TIME LIMIT ***\n")
    (top, *_) = run(log)
    assert top.id == "stopped-while-waiting"
    assert "CANCELLED" in top.explanation


def test_warnings_before_the_stop_leave_it_a_wait(tmp_path: Path) -> None:
    # c10d's hostname and IPv6 warnings (torch prints them on healthy nodes too), then torchrun
    # is told to stop: the node waited, the warnings are no failure
    log = write(tmp_path, "[W1202 10:46:16.480878728 socket.cpp:207] [c10d] The hostname of the "
                "client socket cannot be retrieved. err=-3\n"
                "[W socket.cpp:464] [c10d] The server socket cannot be initialized on [::]:29500 "
                "(errno: 97 - Address family not supported by protocol). Error ignored\n"
                "W1204 09:36:50.110000 27170 torch/distributed/elastic/agent/server/api.py:753] "
                "Received 15 death signal, shutting down workers\n")
    (top, *_) = run(log)
    assert top.id == "stopped-while-waiting"
    assert [e.line for e in top.evidence] == [3]


def test_the_hung_node_of_a_sim_run_waited_and_both_logs_name_the_cause() -> None:
    # 2-node sim capture (tests/integration/test_doctor_sim_capture.py): node 1 is refused and
    # gives up, node 0 hangs until it is stopped
    node0 = CAPTURED / "sim_gloo_wrong_interface_node0.log"
    assert run(node0)[0].id == "stopped-while-waiting"
    both = run(node0, CAPTURED / "sim_gloo_wrong_interface_node1.log")
    assert both[0].id == "wrong-interface"
    assert "stopped-while-waiting" not in {f.id for f in both}


def test_the_message_of_a_cpp_terminate_is_read(tmp_path: Path) -> None:
    # std::terminate prints the exception's message on the line after "terminate called"
    log = write(tmp_path, "terminate called after throwing an instance of 'gloo::IoException'\n"
                          "  what():  [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:598] "
                          "Read timeout [10.0.0.2]:7001\nAborted (core dumped)\n")
    (top, *_) = run(log)
    assert top.id == "collective-timeout" and top.severity == "error"
    assert "gloo gloo/transport/tcp/" in top.explanation
    assert 2 in [e.line for e in top.evidence]


# CUDA's cudaErrorCudartUnloading, cudaGetErrorString's "driver shutting down": a call made while
# the process exits, after the CUDA runtime unloaded. Lines from the checks' sources: Gloo's
# CUDA_CHECK (gloo/cuda_private.h: GLOO_ENFORCE_EQ(error, cudaSuccess, "Error at: ", __FILE__,
# ":", __LINE__, ": ", cudaGetErrorString(error)), which enforce.h prints as "[enforce fail at
# FILE:LINE] error == cudaSuccess. A vs B. ") and torch's C10_CUDA_CHECK ("CUDA error: %s"),
# each after C++'s std::terminate line
AT_EXIT = [
    ["terminate called after throwing an instance of 'gloo::EnforceNotMet'",
     "  what():  [enforce fail at gloo/cuda_private.h:40] error == cudaSuccess. 4 vs 0. "
     "Error at: gloo/cuda_private.h:40: driver shutting down"],
    ["[rank1]: terminate called after throwing an instance of 'c10::Error'",
     "[rank1]:   what():  CUDA error: driver shutting down"],
    # the same raised in Python at exit: CPython's unraisable hook ("Exception ignored in: %R",
    # Python/errors.c) prints the traceback of a __del__ that failed during interpreter shutdown
    ["Exception ignored in: <function Stream.__del__ at 0x7f3a2c1d5e50>",
     "Traceback (most recent call last):",
     '  File "/usr/lib/python3/dist-packages/torch/cuda/streams.py", line 41, in __del__',
     "RuntimeError: CUDA error: driver shutting down"],
]


@pytest.mark.parametrize("lines", AT_EXIT)
def test_cuda_unloaded_at_exit_is_no_failure_of_the_run(tmp_path: Path, lines: list[str]) -> None:
    (top, *_) = run(write(tmp_path, "\n".join(["epoch 3 loss 0.21", *lines]) + "\n"))
    assert (top.id, top.severity) == ("no-failure", "info")
    assert "cudaErrorCudartUnloading" in top.explanation and "exiting" in top.explanation
    assert "InfiniBand" not in top.explanation  # (the entry's NCCL words are not this log's)


@pytest.mark.parametrize("lines", AT_EXIT)
def test_a_failure_before_the_exit_keeps_its_own_finding(tmp_path: Path,
                                                        lines: list[str]) -> None:
    before = ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
              "KeyError: 'labels'"]
    (top, *_) = run(write(tmp_path, "\n".join([*before, *lines]) + "\n"))
    assert top.severity == "error" and top.id != "no-failure"


def test_an_unrelated_terminate_before_the_exit_line_stays_a_failure(tmp_path: Path) -> None:
    # the terminate the exit line ends is the one just before it; another one is its own abort
    lines = ["terminate called after throwing an instance of 'std::runtime_error'",
             "  what():  unable to open shared memory object", "epoch 3 loss 0.21",
             *AT_EXIT[0]]
    (top, *_) = run(write(tmp_path, "\n".join(lines) + "\n"))
    assert top.severity == "error"
