"""A log whose every line carries a launcher's tag or label reads as the same log without: srun
--label puts "%d: " before each line, pdsh (DeepSpeed's multi-node runner) "<host>: ", Docker
Compose "<service>  | ", torchrun's agent its log_line_prefix_template,
"[${role_name}${local_rank}]:" ("[default0]:"), before each line of a worker it tees
(torch/distributed/elastic/agent/server/local_elastic_agent.py), and torch's excepthook
f"[rank{rank}]: " before each line of an uncaught exception (distributed_c10d.py). Lines made from
Python's warnings (warnings.formatwarning: the warning, then its source line indented), CPython's
traceback (its head, frames, no exception line kept), Python logging's default format
("WARNING:<logger>:<message>"), torchelastic's keep-alive warning
(elastic/rendezvous/dynamic_rendezvous.py) and NCCL's error text as torch prints it."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import tops

from ddpkit.doctor.log.prefixes import after_tags, parse_prefix

WARNED = ("/x/site-packages/torch/distributed/distributed_c10d.py:4631: UserWarning: No device id "
          "is provided via `init_process_group` or `barrier `. Using the current device set by "
          "the user.")
KEEP_ALIVE = ("WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node "
              "'node-1_4242_0' has failed to send a keep-alive heartbeat to the rendezvous 'none' "
              "due to an error of type RendezvousConnectionError.")
LOGS = [
    ["step 10 loss 0.31", WARNED, "  warnings.warn(  # warn only once"],
    ["epoch 0", "Traceback (most recent call last):", '  File "train.py", line 12, in <module>',
     "    main()"],
    [KEEP_ALIVE] * 3,
    ["*" * 40, "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default",
     "*" * 40],
    # torch's NCCL error text (ProcessGroupNCCL's "<result text> (run with NCCL_DEBUG=WARN for
    # details), NCCL version %s", then ncclGetErrorString's name and words)
    ["invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.26.2",
     "ncclInvalidUsage: This usually reflects invalid usage of NCCL library."],
    # an exception raised without a message: its type alone (traceback.format_exception_only)
    ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
     "    assert dist.get_world_size() == 8", "AssertionError"],
    # torch.multiprocessing's ProcessRaisedException, whose message starts with a line break
    # (multiprocessing/spawn.py: "\n\n-- Process %d terminated with the following error:\n")
    ["Traceback (most recent call last):", '  File "train.py", line 40, in <module>',
     "    mp.spawn(main, nprocs=2)", "torch.multiprocessing.spawn.ProcessRaisedException: ", "",
     "-- Process 1 terminated with the following error:", "Traceback (most recent call last):",
     '  File "train.py", line 20, in main', "    loader = iter(data)",
     "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed. "],
    # bash's report of a child a signal ended (jobs.c: strsignal(), "(core dumped)")
    ["step 1", "Segmentation fault (core dumped)"],
    ["Loading checkpoint shards:  50%", "Killed"],
    # py-spy's dump (src/dump.rs: 'Thread {id} ({status}): "{name}"', "    {name} ({file}:{line})")
    ['Thread 4242 (active): "MainThread"', "    barrier (torch/distributed/distributed_c10d.py:4155)",
     "    main (train.py:40)", "    <module> (train.py:52)"],
    # NCCL's NET/Socket list posted one interface per line (net_socket.cc: "[%d]%s:%s<%d>")
    ["node1:4242:4242 [0] NCCL INFO NET/Socket : Using", "[0]docker0:172.17.0.1<0>",
     "[1]eth0:10.0.0.5<0>"],
    # pybind11's refusal of TCPStore's arguments (a signature per line, then "Invoked with: ")
    ["TypeError: __init__(): incompatible constructor arguments. The following argument types are "
     "supported:", "    1. torch._C._distributed_c10d.TCPStore(host_name: str, port: int, "
     "world_size: Optional[int] = None, is_master: bool = False)", "",
     "Invoked with: '10.0.0.5', 70000, 2, True, datetime.timedelta(seconds=1800)"],
]


@pytest.mark.parametrize("tag", ["[default0]:", "[trainer3]:", "[rank0]: ", "0: ", "node3: ",
                                 "node3: [rank1]: ", "trainer-1  | "])
@pytest.mark.parametrize("lines", LOGS)
def test_a_tag_on_every_line_changes_no_reading(tmp_path: Path, tag: str,
                                                lines: list[str]) -> None:
    want, got = tops(tmp_path, lines, lambda line: tag + line)
    assert (got.id, got.severity) == (want.id, want.severity)


@pytest.mark.parametrize(("text", "line"), [
    ("[default0]:  warnings.warn(", "  warnings.warn("),
    ("[rank3]:   raise e", "  raise e"),  # (torch's one space after the tag is its own)
    ("[rank3]: ****", "****"),
    ("[1,3]<stdout>:[rank3]:x", "x"),
    ("  indented, no tag", "  indented, no tag"),
    ("0:   warnings.warn(", "  warnings.warn("),  # srun --label's "%d: "
    ("gpu-node-3: [rank1]: x", "x"),  # pdsh's "<host>: "
    ("trainer-1      |   warnings.warn(", "  warnings.warn("),  # Docker Compose's
])
def test_the_line_as_its_process_printed_it(text: str, line: str) -> None:
    assert after_tags(text) == line


@pytest.mark.parametrize("lines", LOGS)
def test_colour_codes_around_every_line_change_no_reading(tmp_path: Path,
                                                          lines: list[str]) -> None:
    want, got = tops(tmp_path, lines, lambda line: f"\x1b[32m{line}\x1b[0m")
    assert (got.id, got.severity) == (want.id, want.severity)


@pytest.mark.parametrize(("text", "expected"), [
    ("trainer-1  | node1:4242:4243 [0] NCCL INFO Bootstrap : Using eth0", ("node1", "trainer-1", None)),
    ("gpu-3: node1:4242:4243 [0] NCCL INFO x", ("node1", "gpu-3", None)),  # pdsh's host
    ("7: node1:4242:4243 [0] NCCL INFO x", ("node1", None, 7)),  # srun's task id: the rank
])
def test_a_label_before_an_nccl_line_names_its_node_or_rank(
        text: str, expected: tuple[str | None, str | None, int | None]) -> None:
    assert parse_prefix(text) == expected
