"""Open MPI's launcher reporting a rank a signal ended: the rank's death, read like torchrun's.

The lines are Open MPI's own templates (orte/tools/orterun/help-orterun.txt, v4:
[orterun:proc-aborted] "%s noticed that process rank %lu with PID %d on node %s exited on signal
%d." and [orterun:proc-aborted-strsignal], the same with " (%s)" of strsignal() before the full
stop; PRRTE's help-prterun.txt, Open MPI 5, the same words from prterun), between the dashed rules
Open MPI's help messages print, with values drawn from the signal numbers of signal(7).
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
