"""Issue 35: with LANG=zh_CN.UTF-8, what ddpkit prints is Chinese and fits 80 columns.

Every command's usage errors and ``--help`` (sub-commands too), ``nics``, ``plan``, ``bench
--dry-run`` and ``doctor --log`` over every log fixture, run in this process as the entry runs them:
no English sentence outside code (backticks, command lines), flags, ids, paths and quoted log lines
(a short allow-list of words the glossary keeps English), and no line wider than 80 columns. While
they run, a translated ``Text`` that goes through ``+``, ``%`` or a format (an f-string) fails the
test where it happens (the run-time side of tests/unit/test_text_kept.py).
"""

from __future__ import annotations

import io
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from parser_tree import parsers

from ddpkit.cli.command_table import COMMANDS, build_parser
from ddpkit.cli.main import main
from ddpkit.cli.output.console import Console
from ddpkit.i18n import Text, use_language
from zh_text import WIDTH, problems

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
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
        for sub_name, sub in parsers(name, parser):
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
                 ("bench", "--dry-run"), ("bench", "--dry-run", "--quick"),
                 ("explain", "wrong-interface"), ("explain", "shm"),
                 ("explain", "no-private-network")):
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


def test_quoted_log_words_are_left_out_and_chinese_still_breaks_a_run() -> None:
    """The checker's own contract: a stretch of the log quoted in Chinese text is not English
    prose, and two English words twelve Chinese characters from a third are not a run of three
    (CI's clone path wrapped dgxsparks_14's diagnosis so, and the old join made it one)."""
    log = "NCCL WARN Call to connect returned Connection refused, retrying"
    assert not problems("q", "  NCCL 报告 Call to connect returned Connection refused，重试中", log)
    line = "误，work completion 带着错误状态返回，内存注册失败，或者 GPUDirect RDMA 不可用。"
    assert not problems("q", line, log)
    assert problems("q", "误，work completion came back 带着错误状态返回", log)


def _logs() -> list[Path]:
    return sorted((FIXTURES / "logs").rglob("*.log")) + sorted((FIXTURES / "real-logs").rglob("*.log"))


def test_doctor_log_over_every_fixture(chinese_locale: list[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # relative paths: the diagnosis quotes the log's path, so where the clone lies must not move
    # the line breaks (an absolute path made CI's output differ from a developer's)
    monkeypatch.chdir(ROOT)
    found: list[str] = []
    logs = _logs()
    assert len(logs) > 100
    for log in logs:
        _code, text = _run("doctor", "--log", str(log.relative_to(ROOT)))
        found += problems(f"doctor --log {log.relative_to(FIXTURES)}", text,
                          quoted_from=log.read_text(encoding="utf-8", errors="replace"))
    assert found == [] and chinese_locale == [], "\n".join(found[:80] + chinese_locale[:40])
