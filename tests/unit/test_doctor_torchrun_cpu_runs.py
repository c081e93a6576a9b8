"""What the real torchrun printed for twenty-six ways a small Gloo job fails (one started with
the older torch.distributed.launch), and for one run that worked, and what two scripts printed
that start their processes without torchrun (tests/fixtures/logs/torchrun-cpu/, made by its
make.sh with torch 2.13.0: each run's console, every rank's lines after torchrun's tee, and
torchrun's own --log-dir), read by `doctor --log` both ways. These lines were written by torch,
not by ddpkit's authors; the expected answer is the cause each script plants."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.log.diagnose import diagnose

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "torchrun-cpu"
SILENT = "Local rank 1's stderr"  # (causes/empty_rank_log.py)

# scenario -> (finding from the console, from the log dir, words the top finding must say: the
# same both ways, or a pair: the console's, the log dir's)
EXPECTED: dict[str, tuple[str, str, str | tuple[str, str]]] = {
    # rank 1 raises KeyError after init, rank 0 waits in a barrier
    "own": ("rank-failed", "rank-failed", "Rank 1 failed on its own account: KeyError"),
    # rank 1 SIGKILLs itself (or dereferences NULL): the console's summary names it; in the log
    # dir its stderr is empty beside rank 0's lost peer, and that names it
    "kill": ("rank-failed", "rank-failed", ("killed by SIGKILL", SILENT)),
    "segv": ("rank-failed", "rank-failed", ("killed by SIGSEGV", SILENT)),
    # rank 1 sleeps past a 5 s process-group timeout: rank 0's all_reduce times out
    "hang": ("collective-timeout", "collective-timeout", ""),
    # rank 1 sleeps past rank 0's dist.monitored_barrier(timeout=5 s): Gloo's barrier names it
    "monitored": ("collective-timeout", "collective-timeout",
                  "monitored barrier (dist.monitored_barrier) gave up waiting after 5000 ms. "
                  "Rank 1 never completed it"),
    # rank 1 exits 0 before the barrier: rank 0 loses its peer (the console: torchrun reports
    # rank 0 only); in the log dir rank 1's stderr is empty, and that names it
    "exit": ("connection-lost", "rank-failed", ("", SILENT)),
    # a barrier without init_process_group
    "noinit": ("invalid-usage", "invalid-usage", ""),
    # the NCCL backend on a build without NCCL
    "nccl": ("invalid-usage", "invalid-usage", ""),
    # all_reduce of 4 floats on rank 0, 5 on rank 1: Gloo's size check
    "shape": ("collective-timeout", "collective-timeout", "different sizes"),
    # init_process_group(world_size=3) under two processes: Gloo's connect waits for rank 2
    "world": ("rendezvous-timeout", "rendezvous-timeout", "for rank 2 to publish its address"),
    # rank 1 allocates 10 TB of host memory
    "oom": ("out-of-memory", "out-of-memory", ""),
    # GLOO_SOCKET_IFNAME names no interface of the machine
    "ifname": ("interface-not-found", "interface-not-found", ""),
    # init_process_group called twice
    "twice": ("invalid-usage", "invalid-usage", ""),
    # DDP over a module with a parameter forward never uses, without find_unused_parameters
    "ddp": ("invalid-usage", "invalid-usage", ""),
    # every rank fails the same way before init, its lines tagged by local rank only: the error
    # is still named
    "import": ("rank-failed", "rank-failed", "ModuleNotFoundError: No module named 'deepspeed'"),
    "syntax": ("rank-failed", "rank-failed", "SyntaxError: '(' was never closed"),
    # DDP over a model whose layer has another shape on rank 1: DDP's check across ranks
    "params": ("rank-failed", "rank-failed", "params[0] in this process with sizes [5, 4]"),
    # all_reduce on rank 0, broadcast on rank 1, TORCH_DISTRIBUTED_DEBUG=DETAIL
    "mismatch": ("collective-timeout", "collective-timeout", "called different collectives"),
    # rank 1 raises KeyError, torchrun --max-restarts 1 restarts the workers, and the restarted
    # attempt dials the attempt before's address (refused): the first attempt's error is named
    "restart": ("rank-failed", "rank-failed", "Rank 1 failed on its own account: KeyError"),
    "restart_c10d": ("rank-failed", "rank-failed", "Rank 1 failed on its own account: KeyError"),
    # torch.cuda.set_device on this CPU wheel: its torch._C has no CUDA bindings
    "cuda": ("cuda-error", "cuda-error", "CPU-only build"),
    # python -m torch.distributed.launch passes --local-rank=N to a script whose argparse
    # declares no such option
    "localrank": ("local-rank-argument", "local-rank-argument", "rejected --local-rank=N"),
    # a file:// init_method whose file an earlier run, killed, left behind: Gloo dials a port of
    # that run on this machine and is refused (not a wrong interface: one machine)
    "filestore": ("rendezvous-config", "rendezvous-config", "FileStore (file://)"),
    # DataLoader workers' batches through an 8 MiB /dev/shm: torch 2.x's posix_fallocate failure
    "shm": ("shm", "shm", "No space left on device"),
    # a DataLoader worker of rank 1 SIGKILLed (the OOM killer's signal): torch names it in rank 1;
    # its traceback passes a ConnectionResetError of Python's own multiprocessing first, and rank
    # 0 loses rank 1 (neither is the cause)
    "workerkill": ("out-of-memory", "out-of-memory", "DataLoader worker"),
}
# a run that worked prints nothing at its end (torchrun's agent logs its success at INFO, which
# it does not show): the log cannot say the run finished, and says so (a warning, no error)
NO_END = {"plain": "no-result"}


@pytest.mark.parametrize("where", ["console", "log-dir"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_real_torchrun_failure_reads_as_its_cause(name: str, where: str) -> None:
    console, log_dir, said = EXPECTED[name]
    path = RUNS / name / ("console.log" if where == "console" else "logs")
    top = diagnose([str(path)])[0]
    assert (top.id, top.severity) == (console if where == "console" else log_dir, "error")
    words = said if isinstance(said, str) else said[where != "console"]
    assert words in top.explanation


def test_the_console_beside_the_log_dir_names_the_kill_itself() -> None:
    # torchrun's Failures: table says how rank 1 ended; its empty stderr only that it said nothing
    top = diagnose([str(RUNS / "kill" / "console.log"), str(RUNS / "kill" / "logs")])[0]
    assert top.id == "rank-failed" and "killed by SIGKILL" in top.explanation
    assert SILENT not in top.explanation


@pytest.mark.parametrize("where", ["console", "log-dir"])
@pytest.mark.parametrize("name", sorted(NO_END))
def test_a_real_torchrun_success_is_no_failure_claimed(name: str, where: str) -> None:
    path = RUNS / name / ("console.log" if where == "console" else "logs")
    top = diagnose([str(path)])[0]
    assert (top.id, top.severity) == (NO_END[name], "warning")


# runs where no rank started, so torchrun wrote no --log-dir: the agent's own lines only
AGENT_ONLY = {
    # another program listens on the master port: torchrun's store cannot listen
    "busy": "port-in-use",
    # one node of two started: the c10d rendezvous waited for the other until join_timeout
    "alone": "rendezvous-timeout",
    # node 1 of two, given 127.0.0.1 as --master-addr, whose master's store never listened: its
    # connects retried until the timeout. A static rendezvous client's log cannot tell this
    # machine's node 0 not started from node 0 on another machine, which loopback never reaches
    # (the usual case); the reading names the second and says the first
    "refused": "wrong-interface",
    # node 0 of two (static rendezvous), whose other node never started: its store's wait for
    # clients timed out
    "alone_static": "rendezvous-timeout",
}


@pytest.mark.parametrize("name", sorted(AGENT_ONLY))
def test_a_run_no_rank_of_which_started_reads_from_the_agent(name: str) -> None:
    top = diagnose([str(RUNS / name / "console.log")])[0]
    assert (top.id, top.severity) == (AGENT_ONLY[name], "error")
    if name == "refused":
        assert "127.0.0.1" in top.explanation
        assert "node 0's agent was not listening yet" in top.explanation


@pytest.mark.parametrize("name", ["restart", "restart_c10d"])
@pytest.mark.parametrize("where", ["console.log", "logs"])
def test_a_restart_that_dialled_the_attempt_before_is_told_apart(name: str, where: str) -> None:
    # the refusal at 127.0.0.1 after the restart is torchrun's shared store, not a wrong
    # interface (this is one machine): a warning after the first attempt's own error
    found = diagnose([str(RUNS / name / where)])
    assert [(f.id, f.severity) for f in found] == [("rank-failed", "error"),
                                                   ("rendezvous-config", "warning")]
    assert "torchrun restarted the workers" in found[1].explanation
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" in found[1].fix


def test_a_script_run_without_a_launcher_is_told_to_use_one() -> None:
    # plain python, init_process_group("gloo") with env:// and nothing set
    top = diagnose([str(RUNS / "noenv_own" / "console.log")])[0]
    assert (top.id, top.severity) == ("rendezvous-config", "error")
    assert "needs RANK in the environment" in top.explanation and "launch" in top.fix


def test_a_process_mp_spawn_started_is_named_with_its_own_error() -> None:
    # the script starts its processes with torch.multiprocessing.spawn; process 1 raises
    top = diagnose([str(RUNS / "mp_spawn_own" / "console.log")])[0]
    assert (top.id, top.severity) == ("rank-failed", "error")
    assert "Process 1 of mp.spawn" in top.explanation
    assert "RuntimeError: expected input batch_size (16)" in top.explanation
