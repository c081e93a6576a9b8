"""doctor --log: two machines NCCL takes for one, read from its intra-node link lines (issue 12)."""

from __future__ import annotations

from pathlib import Path

from ddpkit.doctor.log.diagnose import diagnose


def _top(tmp_path: Path, text: str) -> tuple[str, str]:
    log = tmp_path / "run.log"
    log.write_text(text)
    finding = diagnose([str(log)])[0]
    return finding.id, finding.severity


def test_two_ranks_on_one_gpu_of_one_hostname_is_a_node_mismatch(tmp_path: Path) -> None:
    # pre-2.4 format, without the NCCL word: rank 10 on GPU 2 next to this host's rank 2 on GPU 2
    text = ("gpu060:11:21 [2] INFO Ring 00 : 2[2] -> 3[3] via P2P/IPC\n"
            "gpu060:13:23 [6] INFO Ring 00 : 6[6] -> 10[2] via P2P/IPC\n"
            "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:260, unhandled cuda error\n")
    assert _top(tmp_path, text) == ("node-mismatch", "error")


def test_the_same_with_the_nccl_word_and_shared_memory(tmp_path: Path) -> None:
    text = ("n1:11:21 [0] NCCL INFO Ring 00 : 0[0] -> 1[1] via direct shared memory\n"
            "n1:12:22 [1] NCCL INFO Ring 00 : 1[1] -> 5[0] via direct shared memory\n")
    assert _top(tmp_path, text) == ("node-mismatch", "error")


def test_distinct_gpus_and_network_links_raise_nothing(tmp_path: Path) -> None:
    text = ("n1:11:21 [0] NCCL INFO Ring 00 : 0[0] -> 1[1] via P2P/IPC\n"
            "n1:12:22 [1] NCCL INFO Ring 00 : 1[1] -> 2[0] [send] via NET/Socket/0\n"
            "n2:11:21 [0] NCCL INFO Ring 00 : 2[0] -> 3[1] via P2P/IPC\n"
            "n2:12:22 [1] NCCL INFO Ring 00 : 3[1] -> 0[0] [send] via NET/Socket/0\n")
    # (nothing about the GPUs; the log stops inside NCCL's init: no-result, a warning)
    assert _top(tmp_path, text) == ("no-result", "warning")
