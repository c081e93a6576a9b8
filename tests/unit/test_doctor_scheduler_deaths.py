"""The schedulers' words for a task's death and their memory limits' kills: Slurm's and
Kubernetes'.

The lines are Slurm's own templates: slurmstepd on the step's memory cgroup
(src/plugins/task/cgroup and cgroup/v1|v2, 21.08 on: "Detected %u oom_kill event%s in %ps. Some
of the step tasks have been OOM Killed."; before 21.08 "Detected %u oom-kill event(s) in step
%u.%u cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler.";
jobacct_gather's "%ps exceeded memory limit (%"PRIu64" > %"PRIu64"), being killed"), and srun on
each task a signal or the OOM handler ended ("srun: error: %s: task%s %s: %s", strsignal's words
or "Out Of Memory", " (core dumped)" after them; "Exited with exit code %d" for an exit), with
node names, step ids and task lists drawn from Slurm's forms ("0", "0-3", "0,2"). Kubernetes
names a container the kernel killed at its memory limit by the reason "OOMKilled" (its API's
ContainerStateTerminated.reason; kubectl describe prints "Reason: OOMKilled" and the exit code
137). Ray's memory monitor kills a task when its node runs low on host memory
(ray/_private/memory_monitor and the raylet: "ray.exceptions.OutOfMemoryError: Task was killed due
to the node running low on memory.").
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

CGROUP_OOM = [
    "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the step tasks have "
    "been OOM Killed.",
    "[2026-03-28T14:27:13.072] error: Detected 2 oom_kill events in StepId=4242.batch. Some of "
    "the step tasks have been OOM Killed.",
    "slurmstepd: error: Detected 1 oom-kill event(s) in step 4242.0 cgroup. Some of your "
    "processes may have been killed by the cgroup out-of-memory handler.",
    "slurmstepd: error: StepId=4242.batch exceeded memory limit (734003200 > 52428800), being "
    "killed",
    "srun: error: gpu-07: task 3: Out Of Memory",
]


@pytest.mark.parametrize("line", CGROUP_OOM)
def test_slurms_memory_cgroup_killing_a_task_is_out_of_host_memory(tmp_path: Path,
                                                                   line: str) -> None:
    found = top(tmp_path, ["epoch 1 step 300 loss 1.92", line])
    assert (found.id, found.severity) == ("out-of-memory", "error")
    assert found.explanation.startswith("Out of host memory")


def test_srun_reporting_a_task_killed_is_most_likely_the_oom_killer(tmp_path: Path) -> None:
    found = top(tmp_path, ["srun: error: gpu-07: task 3: Killed",
                           "srun: launch/slurm: _step_signal: Terminating StepId=4242.0"])
    assert (found.id, found.severity) == ("out-of-memory", "error")
    assert "SIGKILL" in found.explanation and "dmesg" in found.fix


@pytest.mark.parametrize(("tasks", "said", "finding", "signal"), [
    ("task 1", "Segmentation fault (core dumped)", "rank-failed", "SIGSEGV"),
    ("tasks 0,2", "Aborted", "rank-failed", "SIGABRT"),
    ("tasks 0-3", "Bus error", "shm", "SIGBUS"),
])
def test_srun_reporting_a_task_a_fatal_signal_ended(tmp_path: Path, tasks: str, said: str,
                                                    finding: str, signal: str) -> None:
    found = top(tmp_path, [f"srun: error: gpu-07: {tasks}: {said}"])
    assert (found.id, found.severity) == (finding, "error")
    assert f"died of {signal}: `{said}`" in found.explanation


def test_an_exit_code_is_no_signal_and_no_memory(tmp_path: Path) -> None:
    found = top(tmp_path, ["srun: error: gpu-07: tasks 0-1: Exited with exit code 1"])
    assert found.severity == "error" and found.id not in ("out-of-memory", "shm")


@pytest.mark.parametrize("lines", [
    ["    State:          Terminated", "      Reason:       OOMKilled", "      Exit Code:    137"],
    ["trainer-worker-1 0/1 OOMKilled 2 (40s ago) 12m"],  # (kubectl get pods' STATUS column)
])
def test_a_container_kubernetes_killed_at_its_memory_limit_is_out_of_host_memory(
        tmp_path: Path, lines: list[str]) -> None:
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("out-of-memory", "error")
    assert found.explanation.startswith("Out of host memory")


def test_rays_memory_monitor_killing_a_task_is_out_of_host_memory(tmp_path: Path) -> None:
    found = top(tmp_path, ["ray.exceptions.OutOfMemoryError: Task was killed due to the node "
                           "running low on memory."])
    assert (found.id, found.severity) == ("out-of-memory", "error")
    assert found.explanation.startswith("Out of host memory")
