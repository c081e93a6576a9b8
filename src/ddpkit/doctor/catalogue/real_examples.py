"""One real log line per finding, from the corpus of public threads (tests/fixtures/real-logs/,
issue 12), shown in docs/findings.md next to the finding's description.

Each entry is (the line exactly as posted, the thread it comes from). A finding with no entry has
no confirmed example in the corpus yet.
"""

from __future__ import annotations

REAL_EXAMPLES: dict[str, tuple[str, str]] = {
    "wrong-interface": ("timed out connecting: SO_ERROR: Connection refused, "
                        "remote=[127.0.0.1]:<port>", "aws-samples/aws-do-eks#69"),
    "interface-not-found": ("ifa != nullptr. Unable to find address for: ^lo",
                            "aws-samples/aws-do-eks#51"),
    "port-in-use": ("RuntimeError: Address already in use", "NVIDIA/Megatron-LM#343"),
    "duplicate-gpu": ("Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 50",
                      "NVlabs/Sana#204"),
    "shm": ("include/shm.h:48 NCCL WARN Error while creating shared memory segment "
            "nccl-shm-recv-250a7cc850ba9298-0-1-3 (size 9637888)", "NVIDIA/nccl#342"),
    "version-mismatch": ("idgsim-gpu-001:47744:47744 [0] init.cu:674 WARN Cuda failure 'CUDA "
                         "driver version is insufficient for CUDA runtime version'",
                         "PaddlePaddle/Paddle#8195"),
    "rendezvous-config": ("[W1008 23:40:22.781961348 socket.cpp:767] [c10d] The IPv6 network "
                          "addresses of (job-01k72wn5f8waqw7d81mfggagn4.internal, 50745) cannot be "
                          "retrieved (gai error: -2 - Name or service not known).",
                          "meta-pytorch/monarch#1571"),
    "local-rank-argument": ("train.py: error: unrecognized arguments: --local-rank=0",
                            "huggingface/pytorch-image-models#1728"),
    "ib-error": ("task-646--1-mhpnk:91:123 [0] transport/net_ib.cc:881 NCCL WARN NET/IB : Got "
                 "completion from peer 172.17.127.143<49577> with error 12, opcode 1, len 0, "
                 "vendor err 129", "NVIDIA/nccl#733"),
    "p2p": ("(Runner pid=16018) Cuda failure 217 'peer access is not supported between these",
            "hiyouga/EasyR1#579"),
    "out-of-memory": ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) "
                      "local_rank: 0 (pid: 5343) of binary: /root/miniconda3/bin/python",
                      "OceannTwT/ra-isf#11"),
    "peer-unreachable": ("[W socket.cpp:663] [c10d] The client socket has failed to connect to "
                         "[::ffff:255.255.0.0]:29500 (errno: 110 - Connection timed out).",
                         "hiyouga/LlamaFactory#3715"),
    "node-mismatch": ("learngpu060:3728593:3730444 [6] INFO Ring 00 : 6[6] -> 10[2] via P2P/IPC",
                      "NVIDIA/nccl#187"),
    "no-failure": ("gpu04:9770:9770 [0] NCCL INFO NET/IB : No device found.", "NVIDIA/nccl#541"),
}


def thread_url(source: str) -> str:
    """The GitHub address of ``owner/repo#N`` (issues and pull requests share the path)."""
    repo, number = source.split("#", 1)
    return f"https://github.com/{repo}/issues/{number}"
