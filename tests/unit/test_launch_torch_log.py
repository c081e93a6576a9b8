"""torch's C++ log records in torchrun's and the ranks' output: folded, condensed, never raw.

The fixtures are real torch 2.13 output captured on a simulated cluster: a worker whose master
address nobody holds (torchrun's store client retrying, with backtraces), and a successful
two-node run (the harmless host-name warning from the agent and from a rank).
"""

from __future__ import annotations

import re
from pathlib import Path

from ddpkit.launch.torchrun.torch_log import CPP_RECORD, TorchLog, glog_header

CAPTURED = Path(__file__).parent.parent / "fixtures" / "logs" / "captured"


def _shown(lines: list[str]) -> tuple[TorchLog, list[str]]:
    log = TorchLog()
    return log, [s.text for s in map(log.feed, lines) if s.text is not None]


def test_a_retrying_store_client_becomes_one_fact_and_prints_nothing() -> None:
    lines = (CAPTURED / "torchrun_worker_master_no_route.log").read_text().splitlines()
    log, shown = _shown(lines)
    assert shown == []
    assert log.connect_problem == "no route to host"
    assert log.connect_target is not None and log.connect_target.endswith(":29500")
    assert log.folded_summary() is not None and "×1" in (log.folded_summary() or "")


def test_a_successful_run_shows_the_ranks_output_and_folds_the_rest() -> None:
    lines = (CAPTURED / "torchrun_success_node0.log").read_text().splitlines()
    log, shown = _shown(lines)
    assert shown == ["[default0]:rank 0 all_reduce ok"]
    assert "×2" in (log.folded_summary() or "")


def test_the_exit_barrier_race_after_a_successful_job_is_folded() -> None:
    # node 1 of a job that passed: the master's agent closed the job's store while this agent
    # still waited in its exit barrier (a C++ warning with a backtrace, then torchelastic's own
    # Python traceback, one glog prefix per line)
    lines = (CAPTURED / "torchrun_exit_barrier_race_node1.log").read_text().splitlines()
    log, shown = _shown(lines)
    assert shown == ["[default0]:rank 1 all_reduce ok"]
    assert log.folded == {"a peer address without reverse DNS": 2,
                          "the job's store closed under a waiting client": 1,
                          "torchrun's exit barrier ended as the master's store closed": 1}


def test_a_python_logger_record_is_one_line_and_its_banner_is_folded() -> None:
    prefix = "W1204 10:00:00.123000 4242 torch/distributed/run.py:874] "
    banner = ["", "*****", "Setting OMP_NUM_THREADS environment variable for each process to be "
              "1 in default, to avoid ...", "*****"]
    odd = "E1204 10:00:01.000000 4242 torch/distributed/elastic/agent/server/api.py:99] "
    log, shown = _shown([prefix + text for text in banner] +
                        [odd + "Something else went wrong", odd + "Traceback (most recent call "
                         "last):", odd + "  File x.py"])
    assert shown == ["torch error (api.py): Something else went wrong"]
    assert log.folded == {"torchrun's OMP_NUM_THREADS=1 default for the ranks": 1}
    assert log.records == 2


def test_an_unknown_record_is_condensed_to_one_line_without_its_backtrace() -> None:
    lines = [
        "[default1]:[W1204 10:02:00.000000000 ProcessGroupGloo.cpp:123] Warning: something odd",
        "[default1]:Exception raised from run at /x/socket.cpp:820 (most recent call first):",
        "[default1]:frame #0: c10::Error::Error(c10::SourceLocation) + 0x9d (0x7f in libc10.so)",
        "[default0]:step 3 loss 0.5",  # another rank's line in between
        "[default1]:<omitting python frames>",
        "[default1]:frame #14: _start + 0x21 (0x5 in python)",
        "[default1]:",
        "[default1]:step 3 loss 0.5",
        "W1204 12:00:00.000000 123 TCPStore.cpp:99] glog-style record",
        "[E socket.cpp:10] [c10d] an old torch's record",
        "plain line with frame #0: in it",
    ]
    log, shown = _shown(lines)
    assert shown == [
        "[default1]:torch warning (ProcessGroupGloo.cpp): Warning: something odd",
        "[default0]:step 3 loss 0.5",
        "[default1]:step 3 loss 0.5",
        "torch warning (TCPStore.cpp): glog-style record",
        "torch error (socket.cpp): an old torch's record",
        "plain line with frame #0: in it",
    ]
    assert log.records == 3 and log.folded_summary() is None


def test_refused_and_timed_out_are_named_so() -> None:
    log = TorchLog()
    log.feed("[W1204 10:01:47.892091727 socket.cpp:764] [c10d] The client socket has failed to "
             "connect to [::ffff:10.0.0.2]:29500 (errno: 111 - Connection refused).")
    assert log.connect_problem == "refused"
    log.feed("[E1204 10:04:17.240716985 socket.cpp:1028] [c10d] The client socket has timed out "
             "after 4000ms while trying to connect to (10.0.0.2, 29500).")
    assert (log.connect_problem, log.connect_target) == ("timed out", "10.0.0.2:29500")


def test_the_record_pattern_matches_torchs_prefixes_only() -> None:
    assert CPP_RECORD.match("[W1204 10:00:39.218931516 socket.cpp:207] [c10d] x")
    assert CPP_RECORD.match("[I socket.cpp:207] x")
    assert CPP_RECORD.match("W1204 12:00:00.000000 123 file.cpp:12] x")
    assert not CPP_RECORD.match("[W] my own log line")
    assert not CPP_RECORD.match("Warning: socket.cpp:12] is not a prefix")


def test_the_one_header_grammar_reads_each_level_time_and_path_shape() -> None:
    # c10's logger without glog (c10/util/Logging.cpp): "[W socket.cpp:464] " before torch 2.2,
    # then the month-day as an integer, time and thread id; torchelastic's Python loggers the
    # same without brackets, with the file's path; an absolute __FILE__ in some builds
    lines = {"[W socket.cpp:464] [c10d] x": "W",
             "[E506 09:50:12.118000 77 socket.cpp:462] [c10d] x": "E",
             "I1204 10:22:33.984000 21088 torch/distributed/run.py:874] x": "I",
             "[F1204 10:22:33.984 9 /opt/pytorch/c10/util/Exception.cpp:12] x": "F"}
    header = re.compile(glog_header("(?P<level>[IWEF])"))
    for line, level in lines.items():
        found = header.match(line)
        assert found is not None and found.group("level") == level, line
        assert re.match(glog_header(level), line), line
        assert bool(re.match(glog_header(timed=True), line)) is (level != "W"), line
    for line in ("[W] my own log line", "[E socket.txt:4] x", "E1204 10:22:33 run.py:8] x",
                 "[Wsocket.cpp:464] x"):
        assert header.match(line) is None, line


def test_an_exit_barrier_that_ran_out_of_time_is_said_once_not_folded() -> None:
    # torchrun's agent (agent/server/api.py, _exit_barrier, torch 2.x): logger.exception("Error
    # waiting on exit barrier. Elapsed: %s seconds", ...) after its 300 s exit_barrier_timeout,
    # when another node's agent never arrived (its ranks failed or hung there)
    from ddpkit.launch.torchrun.torch_log import barrier_gave_up_warning

    log = TorchLog()
    shown = log.feed("E1205 10:05:00.984000 21088 torch/distributed/elastic/agent/server/"
                     "api.py:1008] Error waiting on exit barrier. Elapsed: 300.0123 seconds")
    assert shown.text is None and shown.internal
    assert log.barrier_gave_up == 300.0123 and log.folded == {}
    assert "300 s" in barrier_gave_up_warning(300.0123)
    assert "not every node" in barrier_gave_up_warning(300.0123)
    quick = TorchLog()  # the store closing under the barrier: the harmless race, folded
    quick.feed("E1205 10:05:00.984000 21088 torch/distributed/elastic/agent/server/api.py:1008]"
               " Error waiting on exit barrier. Elapsed: 0.0143 seconds")
    assert quick.barrier_gave_up is None and sum(quick.folded.values()) == 1
