from __future__ import annotations

from pathlib import Path

from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.outcomes import describe_exit
from ddpkit.launch.torchrun.command import AGENT, parse_failures, torchrun_argv

FIXTURES = Path(__file__).parent.parent / "fixtures" / "torchrun"


def _config(**kw: object) -> LaunchConfig:
    base: dict[str, object] = dict(nnodes=2, node_rank=1, master_addr="10.0.0.2", entry="train.py",
                                   entry_args=("--lr", "0.1"), master_port=55568)
    base.update(kw)
    return LaunchConfig(**base)  # type: ignore[arg-type]


def test_argv_uses_torchrun_not_the_deprecated_launcher() -> None:
    argv = torchrun_argv("/usr/bin/python3", _config(), local_addr="10.0.0.3", log_dir="/r/torchrun")
    # node 1: a client, torchrun's own main through ddpkit's agent (no --bind)
    assert argv[:4] == ["/usr/bin/python3", "-m", AGENT, "--"]
    assert not any("torch.distributed.launch" in arg for arg in argv)
    assert "--nnodes=2" in argv and "--node-rank=1" in argv
    assert "--master-addr=10.0.0.2" in argv and "--master-port=55568" in argv
    assert "--rdzv-backend=static" in argv
    assert "--local-addr=10.0.0.3" in argv
    assert "--log-dir=/r/torchrun" in argv
    # the script and its own arguments come last, untouched
    assert argv[-3:] == ["train.py", "--lr", "0.1"]


def test_argv_module_entry() -> None:
    argv = torchrun_argv("py", _config(entry="pkg.train", is_module=True, entry_args=()),
                         local_addr=None, log_dir="/r")
    assert argv[-2:] == ["-m", "pkg.train"]
    assert not any(a.startswith("--local-addr") for a in argv)


def test_parse_real_child_failed_report() -> None:
    lines = (FIXTURES / "child_failed_exit3.txt").read_text().splitlines()
    root, failures = parse_failures(lines)
    assert root is not None
    assert (root.rank, root.local_rank, root.exitcode, root.host) == (1, 1, 3, "localhost")
    assert root.signal is None
    assert [(f.rank, f.exitcode) for f in failures] == [(0, -15), (1, 3)]
    sigterm = failures[0]
    assert sigterm.signal == "SIGTERM"


def test_parse_nothing_when_no_report() -> None:
    assert parse_failures(["hello", "world"]) == (None, ())


def test_describe_exit_names_signals() -> None:
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(3) == "exit code 3"
    assert describe_exit(-15, "SIGTERM") == "killed by SIGTERM"


def test_agent_traceback_is_hidden_but_worker_lines_are_not() -> None:
    from ddpkit.launch.torchrun.command import AgentTracebackFilter

    lines = (FIXTURES / "child_failed_exit3.txt").read_text().splitlines()
    shown_filter = AgentTracebackFilter()
    shown = [out for line in lines for out in shown_filter.feed(line)] + shown_filter.finish()
    assert "[default1]:rank 1 about to fail" in shown
    assert not any("ChildFailedError" in line or line.startswith("Traceback") for line in shown)
    assert not any("Root Cause" in line for line in shown)


def test_other_agent_tracebacks_are_kept() -> None:
    from ddpkit.launch.torchrun.command import AgentTracebackFilter

    shown_filter = AgentTracebackFilter()
    lines = ["Traceback (most recent call last):", '  File "x"', "RendezvousTimeoutError: boom"]
    assert [out for line in lines for out in shown_filter.feed(line)] == []
    assert shown_filter.finish() == lines


def _console_lines(lines: list[str], *, stopped: bool) -> list[str]:
    """What a node's console shows of torchrun's lines, as launch/node/session.py feeds them."""
    from ddpkit.launch.torchrun.command import AgentTracebackFilter
    from ddpkit.launch.torchrun.torch_log import TorchLog

    torch_log, agent = TorchLog(), AgentTracebackFilter()
    shown: list[str] = []
    for line in lines:
        seen = torch_log.feed(line)
        if not seen.internal and seen.text is not None:
            shown += agent.feed(seen.text)
    return shown + agent.finish(stopped=stopped)


def test_a_failed_log_record_of_torchrun_s_exit_barrier_stays_off_the_console() -> None:
    """torchrun.log of node 1 in a token-mode run of ddpkit (torch 2.13.0, CPU; CI of 2026-12-05
    and tests/integration/test_public_scripts.py, ddp_example_token): node 0 aborted at exit,
    node 1's agent was in its exit barrier when the store closed and SIGTERM came, and CPython
    printed its '--- Logging error ---' block. Only the script's lines reach the console."""
    lines = (FIXTURES / "logging_error_in_exit_barrier.txt").read_text().splitlines()
    assert "--- Logging error ---" in lines
    for stopped in (True, False):
        shown = _console_lines(lines, stopped=stopped)
        assert shown == [line for line in lines if line.startswith("[default0]:")
                         and not line.startswith("[default0]:[W")], stopped
        assert len(shown) == 4 and shown[-1] == "[default0]:training completed in rank 1!"


def test_a_failed_log_record_of_another_message_is_kept() -> None:
    from ddpkit.launch.torchrun.command import AgentTracebackFilter

    block = ["--- Logging error ---", "Traceback (most recent call last):", '  File "x"',
             "OSError: [Errno 28] No space left on device", "Call stack:", '  File "y"',
             "Message: 'Rendezvous failed for %s'", "Arguments: ('node1',)"]
    harmless = [*block[:6], "Message: 'Error waiting on exit barrier. Elapsed: %s seconds'",
                "Arguments: (0.1,)"]
    agent = AgentTracebackFilter()
    assert [out for line in [*harmless, *block, "after"] for out in agent.feed(line)] == []
    assert agent.finish() == [*block, "after"]
