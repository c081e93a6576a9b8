"""The exception a rank died of, read from real rank output (tests/fixtures/tracebacks/README.md)."""

from __future__ import annotations

from pathlib import Path

from ddpkit.launch.torchrun.tracebacks import (
    PythonException,
    common_exception,
    exit_abort_fix,
    known_fix,
    last_exception,
    without_warnings,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tracebacks"
NUMPY_WARNING = [
    "/venv/lib/python3.11/site-packages/torch/_subclasses/functional_tensor.py:368: UserWarning: "
    "Failed to initialize NumPy: No module named 'numpy' (Triggered internally at "
    "/__w/pytorch/pytorch/torch/csrc/utils/tensor_numpy.cpp:84.)",
    "  return self._C._dispatch(...)",
]


def _lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text().splitlines()


def test_rank_stderr_gives_type_message_and_the_user_frame() -> None:
    raised = last_exception(_lines("user-script-rank0.stderr.log"))
    assert raised == PythonException("RuntimeError", "Numpy is not available", "/tmp/cap/user_train.py",
                                     9, "gather_results")
    assert str(raised) == "RuntimeError: Numpy is not available (at user_train.py:9 in gather_results)"


def test_torchruns_own_child_failed_error_is_not_the_cause() -> None:
    """The launcher log ends with torchrun's ChildFailedError traceback; the rank's exception,
    printed earlier with two prefixes, is what counts."""
    raised = last_exception(_lines("user-script-torchrun.log"))
    assert raised is not None
    assert (raised.type, raised.message, raised.line) == ("RuntimeError", "Numpy is not available", 9)


def test_innermost_frame_outside_torch_and_site_packages() -> None:
    lines = ["Traceback (most recent call last):",
             '  File "/home/u/train.py", line 41, in main',
             "    dist.all_reduce(t)",
             '  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 81, '
             "in wrapper",
             "    return func(*args, **kwargs)",
             "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970"]
    raised = last_exception(lines)
    assert raised is not None and raised.type == "torch.distributed.DistBackendError"
    assert (raised.file, raised.line, raised.function) == ("/home/u/train.py", 41, "main")


def test_chained_tracebacks_give_the_last_one() -> None:
    lines = ["Traceback (most recent call last):", '  File "a.py", line 1, in f', "KeyError: 'x'",
             "", "During handling of the above exception, another exception occurred:", "",
             "Traceback (most recent call last):", '  File "a.py", line 3, in f',
             "ValueError: bad value"]
    raised = last_exception(lines)
    assert raised is not None and (raised.type, raised.message, raised.line) == ("ValueError",
                                                                                "bad value", 3)


def test_no_traceback_no_exception() -> None:
    assert last_exception(["just output", "RuntimeError: printed, not raised"]) is None
    assert last_exception([]) is None


def test_common_exception_needs_every_rank_to_agree() -> None:
    a = PythonException("RuntimeError", "boom", "t.py", 3, "f")
    b = PythonException("RuntimeError", "boom", "t.py", 3, "f")
    assert common_exception([a, b]) == a
    assert common_exception([a, PythonException("ValueError", "boom")]) is None
    assert common_exception([a, None]) is None
    assert common_exception([]) is None


def test_warnings_are_not_output_worth_showing() -> None:
    assert without_warnings([*NUMPY_WARNING, "Traceback (most recent call last):"]) == [
        "Traceback (most recent call last):"]
    assert without_warnings(["[rank0]: " + NUMPY_WARNING[0], "[rank0]:   src line", "real"]) == ["real"]


def test_known_fixes() -> None:
    missing = PythonException("ModuleNotFoundError", "No module named 'numpy.core'")
    assert "pip install numpy" in (known_fix(missing) or "")
    assert "pip install numpy" in (known_fix(PythonException("RuntimeError",
                                                             "Numpy is not available")) or "")
    assert known_fix(PythonException("ValueError", "bad value")) is None


def test_an_abort_at_interpreter_exit_gets_its_fix() -> None:
    lines = (FIXTURES / "exit-abort-torchrun.log").read_text().splitlines()
    fix = exit_abort_fix(lines, -6)
    assert fix is not None and "gc.collect()" in fix and "destroy_process_group" in fix
    assert exit_abort_fix(lines, 1) is None  # not a SIGABRT
    assert exit_abort_fix([line for line in lines if "terminate called" not in line], -6) is None
