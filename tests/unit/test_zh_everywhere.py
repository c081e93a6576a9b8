"""Issue 35: with LANG=zh_CN.UTF-8, what ddpkit prints is Chinese and fits 80 columns.

Every command's usage errors and ``--help`` (sub-commands too), ``nics``, ``plan``, ``bench
--dry-run`` and ``doctor --log`` over every log fixture, run in this process as the entry runs them:
no English sentence outside code (backticks, command lines), flags, ids, paths and quoted log lines
(a short allow-list of words the glossary keeps English), and no line wider than 80 columns. While
they run, a translated ``Text`` that goes through ``+``, ``%`` or a format (an f-string) fails the
test where it happens (the run-time side of tests/unit/test_text_kept.py).
"""

from __future__ import annotations

import argparse
import io
import re
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddpkit.cli.command_table import COMMANDS, build_parser
from ddpkit.cli.main import main
from ddpkit.cli.output.console import Console
from ddpkit.cli.output.width import display_width
from ddpkit.i18n import Text, use_language

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
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
    for part in re.split(r"[\u3000-\u9fff\uff00-\uffef]+|`…`|; |, ", line):
        core = _squeezed(part).strip(" ,.;:()[]'\"#").lower()
        kept.append("" if core and core in quoted_from else part)
    return " ".join(kept)


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


@pytest.fixture()
def chinese_locale(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """LANG=zh_CN.UTF-8 (nothing else set), 80 columns, and the run-time guard: every place a
    Text is turned into plain English text by ``+``, ``%`` or a format is recorded."""
    for variable in ("LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    lost: list[str] = []

    def guarded(how: str):  # type: ignore[no-untyped-def]
        original = getattr(str, how, str.__add__)

        def method(self: Text, *args: object) -> object:
            caller = traceback.extract_stack(limit=2)[0]
            # a Text's own English fill (i18n._fill formats its values) is not a loss
            if "/ddpkit/" in caller.filename and not caller.filename.endswith("/i18n.py"):
                lost.append(f"{Path(caller.filename).name}:{caller.lineno}: a Text through "
                            f"{how}: {str.__str__(self)!r}")
            return original(self, *args) if how != "__radd__" else str.__add__(args[0], self)
        return method

    for how in ("__add__", "__radd__", "__mod__", "__format__"):
        monkeypatch.setattr(Text, how, guarded(how), raising=False)
    yield lost
    use_language("en")


def _run(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Console(out=out, err=err, color=False, width=WIDTH))
    return code, out.getvalue() + err.getvalue()


def _parsers(name: str, parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(f"{name} {sub_name}", sub)


USAGE_ERRORS = [
    ("launch", "--nnodes", "abc", "x.py"), ("launch", "--nnodes", "2:4", "x.py"),
    ("bench", "-b", "1Q", "--dry-run"), ("launch",), ("explain",), ("explain", "nope"),
    ("plan",), ("nics", "--export", "--json"), ("doctor", "--log"), ("stacks",), ("join",),
    ("test", "--nnodes", "0"), ("launch", "--master-port", "70000", "x.py"),
]


def test_usage_errors_and_help(chinese_locale: list[str]) -> None:
    found: list[str] = []
    for name in COMMANDS:
        for argv in ((name, "--no-such-flag"),):
            _code, text = _run(*argv)
            found += problems(" ".join(argv), text)
        parser, _module = build_parser(name)
        for sub_name, sub in _parsers(name, parser):
            found += problems(f"{sub_name} --help", sub.format_help())
    for argv in USAGE_ERRORS:
        code, text = _run(*argv)
        assert code != 0, argv
        found += problems(" ".join(argv), text)
    assert found == [] and chinese_locale == [], "\n".join(found + chinese_locale)


def test_nics_plan_and_bench_dry_run(chinese_locale: list[str], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    found: list[str] = []
    for argv in (("nics",), ("plan", "--params", "7B", "--nodes", "2", "--gpus-per-node", "8",
                             "--inter-node", "25Gbit", "--step-compute", "0.3s"),
                 ("plan", "--params", "7B", "--gpu", "A100-80GB"),
                 ("bench", "--dry-run"), ("bench", "--dry-run", "--quick")):
        _code, text = _run(*argv)
        found += problems(" ".join(argv), text)
    assert found == [] and chinese_locale == [], "\n".join(found + chinese_locale)


def test_the_checks_can_fail(chinese_locale: list[str]) -> None:
    """English output is caught, and so is a Text through an f-string in ddpkit's code."""
    _code, text = _run("--lang", "en", "launch", "--nnodes", "abc", "x.py")
    assert problems("en", text)
    assert problems("wide", "宽宽 " * 30)
    assert not problems("path", "  " + "/very/long/path" * 8)
    exec(compile("f'{text} and more'", str(ROOT / "src" / "ddpkit" / "fake.py"), "eval"),
         {"text": Text("options")})
    assert chinese_locale and "fake.py:1: a Text through __format__" in chinese_locale[0]
    chinese_locale.clear()


def _logs() -> list[Path]:
    return sorted((FIXTURES / "logs").rglob("*.log")) + sorted((FIXTURES / "real-logs").rglob("*.log"))


def test_doctor_log_over_every_fixture(chinese_locale: list[str]) -> None:
    found: list[str] = []
    logs = _logs()
    assert len(logs) > 100
    for log in logs:
        _code, text = _run("doctor", "--log", str(log))
        found += problems(f"doctor --log {log.relative_to(FIXTURES)}", text,
                          quoted_from=log.read_text(encoding="utf-8", errors="replace"))
    assert found == [] and chinese_locale == [], "\n".join(found[:80] + chinese_locale[:40])
