"""What "Chinese output" means for the tests of issue 35 (tests/unit/test_zh_everywhere.py and the
sim's tests/integration/test_zh_sim_test.py): no English sentence outside code (backticks, command
lines), flags, ids, paths, numbers, quoted log lines and the words po/GLOSSARY.md keeps in English;
every line within 80 display columns (a path alone longer than that cannot wrap and is let be)."""

from __future__ import annotations

import re

from ddpkit.cli.output.width import display_width

WIDTH = 80

# Words po/GLOSSARY.md keeps in English (and names of things), which may stand side by side.
KEPT = {
    "rank", "ranks", "store", "rendezvous", "busbw", "bootstrap", "worker", "workers", "token",
    "master", "nccl", "gloo", "torchrun", "tcp", "socket", "sockets", "ddp", "powersgd", "bf16",
    "fp16", "fp32", "exit", "barrier", "hook", "auto", "none", "static", "c10d", "torch",
    "infiniband", "ib", "rdma", "gpu", "gpus", "cuda", "cpu", "mpi", "ssh", "slurm", "docker",
    "dataloader", "py-spy", "traceback", "flight", "recorder", "json", "ok", "veth", "tun", "os",
    "elastic", "agent", "all", "reduce", "gather", "scatter", "broadcast", "to", "net", "plugin",
    "nvidia", "smi", "mlp", "adam", "adamw", "sgd", "lora", "sim", "bench", "plan", "nics",
    "launch", "test", "doctor", "join", "stacks", "explain", "conf", "on", "off", "qp", "gdr",
    "shm", "ulimit", "wireguard", "tailscale", "zerotier", "kubeflow", "pytorchjob", "runpod",
    "skypilot", "hierarchical", "flat", "ring", "report", "stop", "at", "bytes", "zero",
    # terms Chinese ML engineers write in English (translations keep them)
    "batch", "size", "gradient", "checkpointing", "core", "dump", "gdb", "pcie", "nvlink", "make",
    "clean", "world", "local", "prefetch", "checkpoint", "loss", "accuracy", "warm", "up",
}
_CODE_START = re.compile(
    r"^\s*(?:\$ )?(?:ddpkit|export|python3?|pip|torchrun|docker|mount|dmesg|ip|ulimit|sudo|srun|"
    r"cat|echo|nvidia-smi|make|git|ssh|scp|ping|nc|ethtool|sysctl|ufw|iptables|kill|"
    r"[A-Z][A-Z0-9_]+=|/|-)\b")
_QUOTED_LOG = re.compile(r"^\s+(?:…|\S*[/.])\S*:\d+: |^\s+\[\S+\] ")
_SPANS = re.compile(r"`[^`]*`|'[^'\n]*'|\"[^\"\n]*\"|https?://\S+", re.S)
_WORD = re.compile(r"[A-Za-z]+")


def english_runs(line: str) -> list[str]:
    """Runs of three or more English words in a line (code, quotes, flags, ids, paths, numbers
    and the glossary's English words not counted)."""
    if _CODE_START.match(line) or _QUOTED_LOG.match(line):
        return []
    runs: list[list[str]] = [[]]
    for token in line.split():
        bare = token.strip(",.;:()[]<>!?")
        if _WORD.fullmatch(bare) and bare.lower() not in KEPT and not bare.isupper():
            runs[-1].append(bare)
        elif _WORD.fullmatch(bare) or not bare:
            continue  # a kept word neither starts nor breaks a run
        else:
            runs.append([])
        if re.search(r"[\u3000-\u9fff\uff00-\uffef]", token):
            runs.append([])
    return [" ".join(run) for run in runs if len(run) >= 3]


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def unquoted(line: str, quoted_from: str) -> str:
    """``line`` without the stretches that are words of the log it reads (a message NCCL or torch
    printed, quoted in the diagnosis): between two Chinese characters, a stretch found in the log
    as it is (spaces squeezed, wrapping undone) is quoted material."""
    if not quoted_from:
        return line
    kept = []
    # the separators stay: a Chinese stretch still breaks an English run (joining the parts with
    # spaces made 'work completion' and 'GPUDirect', twelve Chinese characters apart, one run)
    for index, part in enumerate(re.split(r"([\u3000-\u9fff\uff00-\uffef]+|`…`|; |, )", line)):
        core = _squeezed(part).strip(" ,.;:()[]'\"#").lower()
        quoted = index % 2 == 0 and bool(core) and core in quoted_from
        kept.append(" " if quoted else part)
    return "".join(kept)


def problems(name: str, text: str, quoted_from: str = "") -> list[str]:
    found = []
    outside = _SPANS.sub("`…`", text)
    log = _squeezed(quoted_from).lower()
    for line in outside.splitlines():
        for run in english_runs(unquoted(line, log)):
            found.append(f"{name}: English {run!r} in {line.strip()!r}")
    for line in text.splitlines():
        longest = max((display_width(word) for word in line.split()), default=0)
        if display_width(line) > WIDTH and longest < WIDTH - 20:  # (a path alone cannot wrap)
            found.append(f"{name}: {display_width(line)} columns: {line!r}")
    return found
