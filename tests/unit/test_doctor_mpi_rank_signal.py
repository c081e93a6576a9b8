"""The MPI launchers reporting a rank a signal ended: the rank's death, read like torchrun's.

The lines are Open MPI's own templates (orte/tools/orterun/help-orterun.txt, v4:
[orterun:proc-aborted] "%s noticed that process rank %lu with PID %d on node %s exited on signal
%d." and [orterun:proc-aborted-strsignal], the same with " (%s)" of strsignal() before the full
stop; PRRTE's help-prterun.txt, Open MPI 5, the same words from prterun), between the dashed rules
Open MPI's help messages print; and MPICH's (and Intel MPI's) hydra (pm/pmiserv: "BAD
TERMINATION OF ONE OF YOUR APPLICATION PROCESSES", "PID %d RUNNING AT %s", "EXIT CODE: %d";
ui/mpich/mpiexec.c: "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: %s (signal %d)" of
strsignal, "APPLICATION TERMINATED ..." in older releases, macOS's strsignal adding the number),
and Horovod's runner (runner/gloo_run.py: "Horovod detected that one or more processes exited
with non-zero status, thus causing the job to be terminated. The first process to do so
was:\nProcess name: {name}\nExit code: {code}\n"), with values drawn from the signal numbers of
signal(7).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

from ddpkit.doctor.log.diagnose import diagnose

RULE = "-" * 74
REPORT = "{launcher} noticed that process rank {rank} with PID {pid} on node {node} exited on " \
         "signal {signum}{name}."


def report(signum: int, name: str = "", *, launcher: str = "mpirun", rank: int = 3,
           node: str = "gpu-node-02") -> list[str]:
    return [RULE, "Primary job  terminated normally, but 1 process returned", RULE,
            REPORT.format(launcher=launcher, rank=rank, pid=48213, node=node, signum=signum,
                          name=f" ({name})" if name else ""), RULE]


@pytest.mark.parametrize("launcher", ["mpirun", "prterun"])
@pytest.mark.parametrize("name", ["Killed", ""])
def test_a_rank_killed_by_sigkill_is_most_likely_the_oom_killer(tmp_path: Path, launcher: str,
                                                                name: str) -> None:
    found = top(tmp_path, report(9, name, launcher=launcher))
    assert (found.id, found.severity) == ("out-of-memory", "error")
    assert "SIGKILL" in found.explanation and "most likely" in found.explanation
    assert "dmesg" in found.fix


@pytest.mark.parametrize(("signum", "name", "signal"), [
    (11, "Segmentation fault", "SIGSEGV"), (6, "Aborted", "SIGABRT")])
def test_a_rank_a_fatal_signal_ended_is_named_with_its_node(tmp_path: Path, signum: int,
                                                            name: str, signal: str) -> None:
    found = top(tmp_path, report(signum, name, rank=5))
    assert (found.id, found.severity) == ("rank-failed", "error")
    assert f"Rank 5 (on gpu-node-02, pid 48213) was killed by {signal}" in found.explanation
    assert found.evidence[0].text.startswith("mpirun noticed that process rank 5")


def test_a_rank_a_bus_error_ended_is_read_as_the_bus_errors_cause(tmp_path: Path) -> None:
    # SIGBUS with nothing else failing: a write to shared memory past its end (causes/bus_error)
    found = top(tmp_path, report(7, "Bus error"))
    assert (found.id, found.severity) == ("shm", "error") and "SIGBUS" in found.explanation


def test_the_node_name_is_printed_clean(tmp_path: Path) -> None:
    # a node name is text from outside: terminal controls in it never reach the console
    found = top(tmp_path, report(11, "Segmentation fault",
                                 node="gpu\x1b]0;title\x07\x1b[2J\u202eevil"))
    assert "\x1b" not in found.explanation and "\u202e" not in found.explanation
    assert "gpu" in found.explanation


def test_other_programs_children_exiting_on_a_signal_are_no_rank(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("child 4242 exited on signal 15 (xterm)\nepoch 3 loss 0.12\n")
    assert all("Rank" not in f.explanation for f in diagnose([str(log)]))


HYDRA = ["=" * 83, "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
         "=   PID 49762 RUNNING AT gpu-node-02", "=   EXIT CODE: {code}",
         "=   CLEANING UP REMAINING PROCESSES", "=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES",
         "=" * 83]
EXIT_STRING = "{head}APPLICATION TERMINATED WITH THE EXIT STRING: {said} (signal {signum})"


@pytest.mark.parametrize("head", ["YOUR ", ""])
def test_hydra_reporting_a_process_killed_is_most_likely_the_oom_killer(tmp_path: Path,
                                                                        head: str) -> None:
    lines = [*(line.format(code=9) for line in HYDRA),
             EXIT_STRING.format(head=head, said="Killed", signum=9),
             "This typically refers to a problem with your application."]
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("out-of-memory", "error")
    assert "SIGKILL" in found.explanation and "dmesg" in found.fix


@pytest.mark.parametrize(("said", "signum", "finding", "signal"), [
    ("Segmentation fault", 11, "rank-failed", "SIGSEGV"),
    ("Segmentation fault: 11", 11, "rank-failed", "SIGSEGV"),
    ("Aborted", 6, "rank-failed", "SIGABRT"),
    ("Bus error", 7, "shm", "SIGBUS"),
])
def test_hydra_reporting_a_fatal_signal(tmp_path: Path, said: str, signum: int, finding: str,
                                        signal: str) -> None:
    lines = [*(line.format(code=signum) for line in HYDRA),
             EXIT_STRING.format(head="YOUR ", said=said, signum=signum)]
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == (finding, "error")
    assert f"died of {signal}" in found.explanation


def test_hydras_block_alone_is_a_failure_it_cannot_name(tmp_path: Path) -> None:
    # the exit string cut off: a process ended badly, how is not in the lines
    found = top(tmp_path, [line.format(code=1) for line in HYDRA])
    assert found.severity == "error" and found.id == "unexplained-failure"


HOROVOD = ["RuntimeError: Horovod detected that one or more processes exited with non-zero "
           "status, thus causing the job to be terminated. The first process to do so was:",
           "Process name: 1", "Exit code: {code}"]


@pytest.mark.parametrize("code", ["137", "-9"])
def test_horovods_first_process_killed_is_most_likely_the_oom_killer(tmp_path: Path,
                                                                     code: str) -> None:
    found = top(tmp_path, [line.format(code=code) for line in HOROVOD])
    assert (found.id, found.severity) == ("out-of-memory", "error") and "SIGKILL" in \
        found.explanation


def test_horovods_first_process_exiting_with_an_error_is_no_signal(tmp_path: Path) -> None:
    found = top(tmp_path, [line.format(code="1") for line in HOROVOD])
    assert (found.id, found.severity) == ("rank-failed", "error")


# Open MPI's report of the first process that exited non-zero (help-orterun.txt
# [orterun:non-zero-exit], v4, the process named by ORTE_NAME_PRINT "[[family,local],vpid]"), and
# PRRTE's (Open MPI 5's prterun, help-prterun.txt: the head wrapped after "status,", the name
# "[nspace,rank]" with its namespace "prterun-<host>-<pid>@1"), between Open MPI's dashed rules.
OPEN_MPI_FIRST = ["{launcher} detected that one or more processes exited with non-zero status, "
                  "thus causing", "the job to be terminated. The first process to do so was:", "",
                  "  Process name: {name}", "  Exit code:    {code}", RULE]
PRRTE_FIRST = ["prterun detected that one or more processes exited with non-zero status,",
               "thus causing the job to be terminated. The first process to do so was:", "",
               "   Process name: {name}", "   Exit code:    {code}", RULE]


def first_failed(block: list[str], *, name: str, code: int,
                 launcher: str = "mpirun") -> list[str]:
    return [RULE, *(line.format(launcher=launcher, name=name, code=code) for line in block)]


@pytest.mark.parametrize(("block", "name", "rank"), [
    (OPEN_MPI_FIRST, "[[34453,1],2]", 2), (OPEN_MPI_FIRST, "[[9235,1],0]", 0),
    (PRRTE_FIRST, "[prterun-gpu-node-02-147515@1,5]", 5)])
@pytest.mark.parametrize("code", [1, 3, 255])
def test_the_first_process_that_exited_non_zero_is_the_failed_rank(
        tmp_path: Path, block: list[str], name: str, rank: int, code: int) -> None:
    found = top(tmp_path, first_failed(block, name=name, code=code))
    assert (found.id, found.severity) == ("rank-failed", "error")
    assert f"Rank {rank} exited with code {code} first" in found.explanation
    assert any(e.text.strip().startswith("Process name:") for e in found.evidence)


def test_the_first_failed_rank_is_named_beside_its_own_error(tmp_path: Path) -> None:
    # the rank's traceback above the launcher's report: the error is quoted, the rank named
    lines = ["Traceback (most recent call last):", '  File "train.py", line 41, in <module>',
             "    main()", "ValueError: expected 4 dimensions, got 3",
             *first_failed(OPEN_MPI_FIRST, name="[[11371,1],3]", code=1, launcher="mpirun.real")]
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("rank-failed", "error")
    assert "Rank 3 exited with code 1 first" in found.explanation
    assert "ValueError: expected 4 dimensions" in found.explanation


def test_the_first_process_killed_through_a_shell_is_most_likely_the_oom_killer(
        tmp_path: Path) -> None:
    # the shell's 128+9 for a rank started through a wrapper script: SIGKILL
    found = top(tmp_path, first_failed(OPEN_MPI_FIRST, name="[[4242,1],1]", code=137))
    assert (found.id, found.severity) == ("out-of-memory", "error") and "SIGKILL" in \
        found.explanation


@pytest.mark.parametrize("launcher", ["mpirun", "prterun", "mpiexec"])
def test_the_reports_head_alone_is_a_failure_it_cannot_name(tmp_path: Path,
                                                            launcher: str) -> None:
    # a paste that stops at the head: a process failed, which and how is not in the lines
    lines = ["step 10 loss 0.31", f"{launcher} detected that one or more processes exited with "
             "non-zero status, thus causing"]
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("unexplained-failure", "error")
    assert any(launcher in e.text for e in found.evidence)


def test_a_process_name_outside_the_report_names_no_rank(tmp_path: Path) -> None:
    # the name and code lines are read only after the report's head
    found = top(tmp_path, ["step 10 loss 0.31", "  Process name: [[34453,1],2]",
                           "  Exit code:    1"])
    assert "Rank 2" not in found.explanation


def test_a_strangers_process_name_is_bounded_and_printed_clean(tmp_path: Path) -> None:
    # a namespace longer than any host name, and terminal controls in it: no rank, nothing raw
    name = "[" + "x" * 5000 + "@1,7]"
    found = top(tmp_path, first_failed(PRRTE_FIRST, name=name, code=1)
                + first_failed(OPEN_MPI_FIRST, name="[[1,1],\x1b]0;t\x07\u202e4]", code=1))
    assert "Rank 7" not in found.explanation and "\x1b" not in found.explanation
    assert "\u202e" not in found.explanation
