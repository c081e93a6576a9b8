"""Where a run's log ends (issue 24): no-result for a log that stops partway, no-failure once it
shows the run finishing, and the shell's ``Killed`` named as the rank's death.

The end-marker lines are built from the templates in ddpkit's message catalogue
(src/ddpkit/doctor/log/messages.json: NCCL's init.cc, torch's elastic agent), with their
placeholders filled, so a change of wording in the catalogue shows here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose

MESSAGES = Path(__file__).resolve().parents[2] / "src" / "ddpkit" / "doctor" / "log" / \
    "messages.json"
PREFIX = "gpu1:500:540 [0] NCCL INFO "
BOOTSTRAP = [PREFIX + "Bootstrap : Using eth1:10.0.0.2<0>",
             PREFIX + "NET/Socket : Using [0]eth1:10.0.0.2<0>", PREFIX + "Using network Socket"]
INIT = [PREFIX + "ncclCommInitRank comm 0x5600 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 "
        "commId 0x1 - Init START",
        PREFIX + "ncclCommInitRank comm 0x5600 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 "
        "commId 0x1 - Init COMPLETE"]


def template(file: str, start: str) -> str:
    """The catalogued template printed by ``file`` that starts with ``start``."""
    messages = json.loads(MESSAGES.read_text())["messages"]
    found = [m["template"] for m in messages if m["file"] == file and m["template"].startswith(start)]
    assert found, (file, start)
    return str(found[0])


def fill(text: str, *values: str) -> str:
    for value in values:
        text = text.replace("<*>", value, 1)
    assert "<*>" not in text
    return text


def run(tmp_path: Path, lines: list[str], name: str = "node.log") -> list[Finding]:
    log = tmp_path / name
    log.write_text("\n".join(lines) + "\n")
    return diagnose([str(log)])


def ids(findings: list[Finding]) -> list[str]:
    return [f.id for f in findings]


def test_init_complete_then_silence_is_no_result_not_no_failure(tmp_path: Path) -> None:
    (finding,) = run(tmp_path, [*BOOTSTRAP, *INIT, "epoch 1 step 10 loss 2.31"])
    assert (finding.id, finding.severity) == ("no-result", "warning")
    assert finding.explanation.startswith("It stops in a collective")
    assert "Nothing in the log failed" in finding.explanation
    assert "Init COMPLETE" in finding.explanation  # the stage it stops in
    assert "other nodes' logs" in finding.fix and "--debug" in finding.fix
    assert "ddpkit doctor --nnodes" in finding.fix
    assert finding.evidence[-1].text.endswith("Init COMPLETE")


def test_bootstrap_only_names_the_bootstrap_stage(tmp_path: Path) -> None:
    (finding,) = run(tmp_path, BOOTSTRAP)
    assert finding.id == "no-result"
    assert "NCCL's bootstrap" in finding.explanation and "gpu1 stopped after" in finding.explanation


def test_nccl_destroy_complete_is_the_end_of_a_run(tmp_path: Path) -> None:
    destroy = fill(template("src/init.cc", "comm <*> rank <*> nranks <*> cudaDev <*> busId <*> - "
                                           "Destroy COMPLETE"), "0x5600", "0", "2", "0", "1000")
    (finding,) = run(tmp_path, [*BOOTSTRAP, *INIT, PREFIX + destroy])
    assert (finding.id, finding.severity) == ("no-failure", "info")
    assert "The run finished" in finding.explanation and "Destroy COMPLETE" in finding.explanation


@pytest.mark.parametrize("start", ["[<*>] worker group successfully finished",
                                   "Local worker group finished ("])
def test_the_elastic_agents_success_is_the_end_of_a_run(tmp_path: Path, start: str) -> None:
    agent = "torch/distributed/elastic/agent/server/api.py"
    text = template(agent, start)
    line = fill(text, "default", "300") if text.startswith("[") else \
        fill(text, "WorkerState.SUCCEEDED", "300")
    stamp = "I1204 10:00:47.553000 4242 torch/distributed/elastic/agent/server/api.py:932] "
    assert ids(run(tmp_path, [*BOOTSTRAP, *INIT, stamp + line])) == ["no-failure"]


def test_a_failed_worker_group_is_no_end_marker(tmp_path: Path) -> None:
    agent = "torch/distributed/elastic/agent/server/api.py"
    line = fill(template(agent, "Local worker group finished ("), "WorkerState.FAILED", "300")
    assert ids(run(tmp_path, [*BOOTSTRAP, *INIT, line])) == ["no-result"]


def test_nccl_tests_last_line_is_the_end_of_a_run(tmp_path: Path) -> None:
    table = ["# Using devices", "#  Rank  0 Group  0 Pid 11 on node1 device  0 [0x01] GPU"]
    assert ids(run(tmp_path, table)) == ["no-result"]
    done = [*table, "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 145.06"]
    assert ids(run(tmp_path, done)) == ["no-failure"]


def test_ddpkits_own_success_summary_is_the_end_of_a_run(tmp_path: Path) -> None:
    lines = [*BOOTSTRAP, *INIT, "ddpkit: node 0 finished in 12.3 s; logs in /tmp/run"]
    assert ids(run(tmp_path, lines)) == ["no-failure"]
    lines = [*BOOTSTRAP, *INIT, "all 2 nodes finished successfully"]
    assert ids(run(tmp_path, lines)) == ["no-failure"]


def test_a_log_of_nothing_ddpkit_knows_is_no_result(tmp_path: Path) -> None:
    # plain training output: nothing says where a run stood, or that it ended, or failed
    (finding,) = run(tmp_path, ["rank 0 initialised", "rank 0 sum [2.0, 2.0]"])
    assert (finding.id, finding.severity) == ("no-result", "warning")
    assert "none of the log's 2 lines" in finding.explanation
    assert "ddpkit doctor --log" in finding.fix and "NCCL_DEBUG=INFO" in finding.fix


def test_a_log_of_known_lines_without_a_stage_stays_no_failure(tmp_path: Path) -> None:
    # a line the message catalogue knows (DDP's reducer after its first iteration, info) and no
    # stage of NCCL's or a benchmark's: nothing failed, and what it shows is known
    rebuilt = template("torch/nn/parallel/distributed.py", "Reducer buckets have been rebuilt")
    assert ids(run(tmp_path, ["rank 0 initialised", "INFO:torch.nn.parallel.distributed:"
                              + rebuilt])) == ["no-failure"]


def test_a_log_that_stops_once_the_store_based_barrier_completed_is_no_result(
        tmp_path: Path) -> None:
    # init_process_group's barrier passed (distributed_c10d.py, torch 1.x, info): the process
    # group was up, and a log that stops there stops partway, as after NCCL's Init COMPLETE
    added = fill(template("torch/distributed/distributed_c10d.py", "Added key: "),
                 "store_based_barrier_key:1", "0")
    done = fill(template("torch/distributed/distributed_c10d.py", "Rank <*>: Completed "
                         "store-based barrier for key:"), "0", "store_based_barrier_key:1", "2")
    (finding,) = run(tmp_path, ["rank 0 initialised", added, done])
    assert (finding.id, finding.severity) == ("no-result", "warning")
    assert "every rank passed init_process_group's store-based barrier (line 3)" in \
        finding.explanation


# ProcessGroupNCCL.cpp's barrier() with no device named (torch 1.8: "Rank %d using GPU %d to
# perform barrier as ...", some releases "using best-guess GPU", from 2.4 after "[PG ID 0 PG
# GUID 0 Rank %d] "), as c10's glog warning or as the info line older releases printed
BARRIER_GUESS = " to perform barrier as devices used by this process are currently unknown. " \
    "This can potentially cause a hang if this rank to GPU mapping is incorrect."


@pytest.mark.parametrize("line", [
    "[W ProcessGroupNCCL.cpp:1569] Rank 1 using best-guess GPU 1" + BARRIER_GUESS,
    "I0412 10:00:01.000000 77 ProcessGroupNCCL.cpp:2291] Rank 0 using GPU 0" + BARRIER_GUESS,
    "[rank3]:[W512 08:14:22.123456789 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 3]  "
    "using GPU 3" + BARRIER_GUESS + " Specify device_ids in barrier() to force use of a "
    "particular device, or call init_process_group() with a device_id.",
])
def test_a_log_that_stops_at_a_barrier_with_a_guessed_gpu_is_no_result(tmp_path: Path,
                                                                        line: str) -> None:
    # a rank entered a barrier, which waits for every rank; nothing after it shows they came
    (finding,) = run(tmp_path, ["epoch 0 setup", line])
    assert (finding.id, finding.severity) == ("no-result", "warning")
    assert "barrier with the GPU ProcessGroupNCCL guessed" in finding.explanation
    assert line.startswith(finding.evidence[-1].text.rstrip("…"))  # (clipped when long)
    # the same line, and then the run's end: the barrier was passed
    done = fill(template("torch/distributed/elastic/agent/server/api.py", "[<*>] worker group "
                         "successfully finished."), "default", "300")
    assert ids(run(tmp_path, ["epoch 0 setup", line, done], "done.log")) == ["no-failure"]


def test_no_result_exits_zero(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "node.log"
    log.write_text("\n".join([*BOOTSTRAP, *INIT]) + "\n")
    result = run_cli("doctor", "--log", str(log), "--json")
    assert result.code == 0
    assert [f["id"] for f in result.json()["findings"]] == ["no-result"]


# --- the shell's "Killed" -------------------------------------------------------------------------

GLOO_RESET = ("terminate called after throwing an instance of 'gloo::IoException'\n"
              "  what():  [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error "
              "[127.0.0.1]:3977: Connection reset by peer")


@pytest.mark.parametrize("killed", [
    "[0]<stderr>:Killed",  # horovodrun's rank prefix, bash's strsignal(SIGKILL)
    "./train.sh: line 12: 31337 Killed                  python train.py",  # bash, a script
    "[1]+  Killed                  python train.py",  # bash's job notification
])
def test_a_killed_rank_comes_before_the_connections_it_closed(tmp_path: Path,
                                                              killed: str) -> None:
    lines = ["epoch 1 batch 0", killed, "", *("[1]<stderr>:" + x for x in GLOO_RESET.split("\n"))]
    findings = run(tmp_path, lines)
    top = findings[0]
    assert (top.id, top.severity) == ("rank-failed", "error"), ids(findings)
    assert "killed by SIGKILL" in top.explanation and "`Killed`" in top.explanation
    assert "OOM killer" in top.fix
    assert top.evidence[0].text.endswith(killed.split("<stderr>:")[-1])
    lost = [f for f in findings if f.id == "connection-lost"]
    assert lost and "consequence" in lost[0].explanation
    if killed.startswith("[0]"):
        assert top.explanation.startswith("Rank 0 was killed by SIGKILL")


def test_killed_with_the_oom_killers_line_is_out_of_memory(tmp_path: Path) -> None:
    lines = ["[Mon Dec  4 10:00:00 2026] Out of memory: Killed process 31337 (python) "
             "total-vm:9000kB", "Killed"]
    assert ids(run(tmp_path, lines))[0] == "out-of-memory"


@pytest.mark.parametrize("bar", [
    # tqdm's format_meter: "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining},
    # {rate_fmt}{postfix}]", redrawn after a carriage return, so no newline precedes the shell's
    # report once the process is killed
    "Loading checkpoint shards:   0%|          | 0/2 [00:00<?, ?it/s]",
    "epoch 1:  45%|####5     | 450/1000 [01:02<01:16,  7.21it/s, loss=0.31]",
    "100%|##########| 1.20G/1.20G [00:31<00:00, 38.5MB/s]",
])
def test_killed_on_a_progress_bars_line_is_the_shells_report(tmp_path: Path, bar: str) -> None:
    top = run(tmp_path, [bar + "Killed"])[0]
    assert (top.id, top.severity) == ("out-of-memory", "error")
    assert "SIGKILL" in top.explanation
    assert ids(run(tmp_path, [bar + "Killed process 31337 (python)"])) == ["no-result"]


@pytest.mark.parametrize("text", ["Killed process 31337 (python)", "the job Killed it",
                                  "KilledBy: none"])
def test_killed_inside_other_words_is_no_kill(tmp_path: Path, text: str) -> None:
    assert "rank-failed" not in ids(run(tmp_path, [text]))


# --- the tail pass: end markers are looked for near the end of a log only ---------------------------

def test_an_end_marker_after_megabytes_of_output_is_found_with_its_line(tmp_path: Path) -> None:
    from ddpkit.doctor.log.scan import scan

    filler = [f"epoch 1 step {i} loss 0.5" for i in range(200_000)]  # about 5 MB
    log = tmp_path / "big.log"
    log.write_text("\n".join([*BOOTSTRAP, *filler, "[1]+  Killed  python train.py",
                              *filler[:1000], "all 2 nodes finished successfully"]) + "\n")
    with log.open("rb") as stream:
        found = [(e.kind, e.line) for e in scan(stream, "big")
                 if e.kind in ("killed", "run-complete")]
    assert found == [("killed", len(BOOTSTRAP) + len(filler) + 1),
                     ("run-complete", len(BOOTSTRAP) + len(filler) + 1002)]


def test_an_end_marker_far_from_the_end_is_not_read(tmp_path: Path) -> None:
    # a documented limit (anchor_words.TAIL_BYTES): megabytes after the marker, the log is taken to
    # go on past it
    filler = [f"epoch 1 step {i} loss 0.5" for i in range(200_000)]
    lines = [*BOOTSTRAP, "all 2 nodes finished successfully", *filler]
    assert ids(run(tmp_path, lines)) == ["no-result"]
