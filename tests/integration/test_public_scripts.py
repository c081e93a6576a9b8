"""Public training scripts, each run with the launch line its own README (or docstring) gives,
``torchrun`` replaced by ``ddpkit launch`` and nothing else, on two simulated nodes (issue 21).

The scripts live in tests/fixtures/scripts/<name>/ with a SOURCE.md each: repository, commit,
path, license and every CPU-only edit. Placeholders in a line are filled with this cluster's
values (node count 2, one process per node, the master's private address, a free port). A line
with no master address (``--nnodes N`` alone) is ddpkit's join-token job: node 0 runs the line,
node 1 runs ``ddpkit join`` with the token node 0 prints, as ddpkit's README says to.

Each case must end with exit 0 on both nodes, print what the script prints on success, leave no
process in either node, and print no C++ backtrace (``frame #N``) or C++ warning line. The one
failure that is torch's, not the launch's (a rank aborted by Gloo at interpreter exit after its
work was done), is an expected failure only when ddpkit's summary names it and its fix.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from multinode import clean_env, kill_tree

from ddpkit.launch.torchrun.tracebacks import EXIT_ABORT_LINE
from ddpkit.sim.topology import SimCluster, node_argv
from ports import free_port

pytestmark = [pytest.mark.root, pytest.mark.slow]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "scripts"
DDPKIT_LAUNCH = [sys.executable, "-m", "ddpkit", "launch"]  # in place of `torchrun`
FRAME = re.compile(r"frame #\d+")
CXX_WARNING = re.compile(r"\[[WE]\d{4} \d\d:\d\d:\d\d")  # torch's C++ log prefix, e.g. [W1204 10:01:02
TOKEN = re.compile(r"ddpkit join (ddpk://\S+)")

# nanoGPT's own `--key=value` overrides (configurator.py): a tiny model, two iterations, on CPU.
NANOGPT_TINY = ("--device=cpu", "--backend=gloo", "--compile=False", "--dtype=float32",
                "--max_iters=2", "--eval_interval=2", "--eval_iters=1", "--log_interval=1",
                "--n_layer=1", "--n_head=2", "--n_embd=32", "--block_size=32", "--batch_size=2",
                "--gradient_accumulation_steps=2", "--out_dir=out-tiny")


@dataclass(frozen=True)
class Case:
    """One script and its README line (after the launcher): ``{rank}``, ``{master}``, ``{port}``."""

    name: str
    line: tuple[str, ...]
    success: tuple[str, ...]  # printed by the script on a good run
    prepare: Callable[[Path], None] | None = None
    token: bool = False  # the line names no master: node 1 joins with node 0's token
    marks: tuple[pytest.MarkDecorator, ...] = field(default=())


def _nanogpt_data(cwd: Path) -> None:
    """train.py reads data/openwebtext/{train,val}.bin (uint16 GPT-2 tokens) from its cwd."""
    import numpy as np

    data = cwd / "data" / "openwebtext"
    data.mkdir(parents=True)
    tokens = np.random.default_rng(0).integers(0, 50257, size=4096, dtype=np.uint16)
    tokens.tofile(data / "train.bin")
    tokens[:1024].tofile(data / "val.bin")


CASES = [
    # karpathy/nanoGPT README, "multiple nodes": static rendezvous, underscore `=` flags.
    Case("nanogpt", ("--nproc_per_node=1", "--nnodes=2", "--node_rank={rank}",
                     "--master_addr={master}", "--master_port={port}", "train.py", *NANOGPT_TINY),
         ("iter 2: loss",), prepare=_nanogpt_data),
    # stas00/ml-engineering torch-distributed-gpu-test.py docstring: the SLURM line, space-separated
    # flags, with the docstring's "rdzv API" form in place of --master_addr/--master_port.
    Case("gpu_test_c10d", ("--nproc_per_node", "1", "--nnodes", "2", "--node_rank", "{rank}",
                           "--rdzv_endpoint", "{master}:{port}", "--rdzv_backend", "c10d",
                           "torch-distributed-gpu-test.py"),
         ("is OK (global rank: 0/2)", "is OK (global rank: 1/2)")),
    # pytorch/tutorials ddp_tutorial.rst: the c10d line, with no --node_rank (c10d hands ranks out
    # in arrival order; with 2 nodes ddpkit takes each node's rank from the endpoint: the node
    # holding it is node 0).
    Case("elastic_ddp_tutorial", ("--nnodes=2", "--nproc_per_node=1", "--rdzv_id=100",
                                  "--rdzv_backend=c10d", "--rdzv_endpoint={master}:29400",
                                  "elastic_ddp.py"),
         ("Start running basic DDP example on rank 0.", "Start running basic DDP example on rank 1.")),
    # pytorch/examples distributed/ddp README: `torchrun --nnodes=1 --nproc_per_node=8 example.py`.
    Case("ddp_example_token", ("--nnodes=2", "--nproc_per_node=1", "example.py"),
         ("training completed in rank 0!", "training completed in rank 1!"), token=True),
    # pytorch/examples distributed/tensor_parallelism README (dash flags, space-separated).
    Case("tensor_parallel_token", ("--nnodes", "2", "--nproc-per-node", "1",
                                   "tensor_parallel_example.py"),
         ("Tensor Parallel training completed!",), token=True),
    Case("sequence_parallel_token", ("--nnodes", "2", "--nproc-per-node", "1",
                                     "sequence_parallel_example.py"),
         ("Sequence Parallel training completed!",), token=True),
]


class Node:
    """A command inside one node whose merged output is read line by line as it comes."""

    def __init__(self, cluster: SimCluster, index: int, argv: Sequence[str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            node_argv(cluster, index, argv), cwd=cwd, env=clean_env(), text=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def drain(self) -> None:
        while not self.lines.empty():
            self.seen.append(self.lines.get())

    def wait_for(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                assert self.proc.poll() is None or not self.lines.empty(), \
                    "exited early:\n" + "\n".join(self.seen[-40:])
                continue
            self.seen.append(line)
            if match := pattern.search(line):
                return match
        raise AssertionError(f"no {pattern.pattern!r} in {timeout} s:\n" + "\n".join(self.seen[-40:]))

    def finish(self, timeout: float) -> int | None:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc.pid)
            self.proc.wait(timeout=30)
            self._reader.join(timeout=5)
            self.drain()
            return None
        self._reader.join(timeout=10)
        self.drain()
        return self.proc.returncode

    @property
    def text(self) -> str:
        return "\n".join(self.seen)


def _finish(nodes: Sequence[Node], deadline: float) -> list[int | None]:
    """Wait for every node; once one has failed, the others get 20 s (a job that failed on one
    node is over; a node left waiting for it is stopped, and its code is None)."""
    while any(node.proc.poll() is None for node in nodes) and time.monotonic() < deadline:
        if any(node.proc.poll() not in (None, 0) for node in nodes):
            deadline = min(deadline, time.monotonic() + 20)
        time.sleep(0.2)
    return [node.finish(timeout=max(0.1, deadline - time.monotonic())) for node in nodes]




def _node_processes(cluster: SimCluster) -> dict[int, list[str]]:
    """Every process inside a node's network namespace, by node (read from /proc, not ddpkit)."""
    inodes = {os.stat(f"/run/netns/{node.namespace}").st_ino: i
              for i, node in enumerate(cluster.nodes)}
    found: dict[int, list[str]] = {}
    for proc in psutil.process_iter(["cmdline"]):
        try:
            index = inodes.get(os.stat(f"/proc/{proc.pid}/ns/net").st_ino)
        except OSError:
            continue
        if index is not None:
            found.setdefault(index, []).append(" ".join(proc.info["cmdline"] or []))
    return found


def _named_exit_abort(codes: Sequence[int | None], output: str) -> bool:
    """Whether the job failed only by torch/Gloo's abort at interpreter exit, and ddpkit said so.

    A rank that has printed its success lines can still be killed by SIGABRT ("terminate called
    without an active exception") while Python shuts down: a Gloo thread releases the last
    collective's work without the GIL (pytorch/pytorch PR 179291; about 1 run in 12 here, more
    under load). That is torch's failure, not the launch's; what ddpkit must do then is fail the
    job (exit 6, job-failed), name the signal, quote the abort line and give the script's fix.
    When the aborted rank was on node 1, node 0's torchrun is still in its exit barrier (it waits
    up to 300 s for every node's agent, and says so): ``_finish`` stops it after 20 s (None).
    """
    flat = " ".join(output.split())  # the summary is wrapped to the terminal's width
    return (6 in codes and set(codes) <= {0, 6, None} and "killed by SIGABRT" in flat
            and EXIT_ABORT_LINE in flat
            and "the rank aborted while Python was shutting down" in flat)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=c.marks) for c in CASES])
def test_public_script_runs_with_its_readme_line(case: Case, sim_cluster: Callable[..., SimCluster],
                                                 tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    values = {"master": cluster.nodes[0].private_address, "port": str(free_port())}
    cwds = []
    for index in range(2):  # each node has a copy of its own, as separate machines would
        cwd = tmp_path / f"node{index}"
        shutil.copytree(FIXTURES / case.name, cwd, ignore=shutil.ignore_patterns("SOURCE.md"))
        if case.prepare is not None:
            case.prepare(cwd)
        cwds.append(cwd)

    started = time.monotonic()
    nodes: list[Node] = []
    try:
        if case.token:
            nodes.append(Node(cluster, 0, DDPKIT_LAUNCH + list(case.line), cwds[0]))
            token = nodes[0].wait_for(TOKEN, 90).group(1)
            nodes.append(Node(cluster, 1, [sys.executable, "-m", "ddpkit", "join", token], cwds[1]))
        else:
            for index in range(2):
                line = [part.format(rank=index, **values) for part in case.line]
                nodes.append(Node(cluster, index, DDPKIT_LAUNCH + line, cwds[index]))
        codes = _finish(nodes, deadline=started + 180)
    finally:
        for node in nodes:
            if node.proc.poll() is None:
                kill_tree(node.proc.pid)
    took = time.monotonic() - started
    output = "\n\n".join(f"--- node {i} (exit {c}) ---\n{n.text[-6000:]}"
                         for i, (n, c) in enumerate(zip(nodes, codes)))
    print(f"{case.name}: {took:.1f} s")
    both = "\n".join(node.text for node in nodes)
    for text in case.success:
        assert text in both, output
    deadline = time.monotonic() + 10
    while (left := _node_processes(cluster)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == {}, f"processes left in the nodes: {left}"
    if codes != [0, 0] and _named_exit_abort(codes, both):
        pytest.xfail("torch/Gloo aborted a rank at interpreter exit after the script's work was done "
                     "(pytorch/pytorch PR 179291); ddpkit named it and its fix")
    assert codes == [0, 0], output
    # Last, so that a run failing only here did everything else right.
    noise = [line for line in both.splitlines() if FRAME.search(line) or CXX_WARNING.search(line)]
    assert noise == [], f"{len(noise)} C++ trace/warning lines, the first: {noise[:3]}\n{output}"
