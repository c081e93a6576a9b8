"""Issue 35: `ddpkit explain ID` prints an error's or a finding's entry offline, in the user's
language, from the entries shipped in the package (generated with docs/errors*.md from one
source); every error's last line names it beside the link."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tools_loader import tool

from ddpkit.doctor.catalogue import CATALOGUE
from ddpkit.error_ids import ERROR_IDS
from ddpkit.errors import ExitCode
from ddpkit.explanations import explanations, known_ids
from ddpkit.i18n import use_language

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def english_after() -> Iterator[None]:
    yield
    use_language("en")


def test_every_error_and_finding_id_has_a_shipped_entry() -> None:
    assert set(ERROR_IDS) | set(CATALOGUE) <= set(known_ids())
    kinds = [e.kind for e in explanations("wrong-interface")]
    assert "finding" in kinds


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tools/errors_doc.py reads TOML (3.11+)")
def test_the_shipped_entries_are_generated_from_the_one_source() -> None:
    errors_doc = tool("errors_doc")
    texts, _problems = errors_doc.pages()
    assert errors_doc.EXPLANATIONS.read_text(encoding="utf-8") == texts["data"], (
        "src/ddpkit/explanations.json is stale: python tools/errors_doc.py write")


@pytest.mark.parametrize(("lang", "words"), [
    ("en", ["doctor finding wrong-interface", "cause: Ranks advertise", "NCCL_SOCKET_IFNAME==eth1",
            "online: https://ddpkit.github.io/errors#wrong-interface"]),
    ("zh", ["诊断结论 wrong-interface", "原因：各 rank 对外公布的地址", "NCCL_SOCKET_IFNAME==eth1",
            "在线版：https://ddpkit.github.io/errors.zh-CN#wrong-interface", "怎么做："]),
])
def test_explain_wrong_interface(run_cli, lang: str, words: list[str]) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("--lang", lang, "explain", "wrong-interface")
    assert result.code == ExitCode.OK, result.err
    for word in words:
        assert word in result.out, result.out
    assert max(len(line) for line in result.out.splitlines()) <= 100


def test_explain_an_error_and_its_json(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("explain", "master-unreachable")
    assert result.code == ExitCode.OK
    assert result.out.startswith("error [master-unreachable] (exit code 5)")
    doc = json.loads(run_cli("explain", "master-unreachable", "--json").out)
    assert doc["schema"] == "ddpkit.explain/1" and doc["id"] == "master-unreachable"
    assert doc["entries"][0]["kind"] == "error" and doc["entries"][0]["exit_code"] == 5
    assert doc["entries"][0]["cause"]["zh"] and doc["entries"][0]["fix"]["en"]


def test_an_unknown_id_is_a_usage_error_with_the_nearest(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("explain", "wrong-interfce")
    assert result.code == ExitCode.USAGE
    assert "error [unknown-id]" in result.err and "wrong-interface" in result.err


def test_every_errors_last_line_names_explain(run_cli) -> None:  # type: ignore[no-untyped-def]
    for lang in ("en", "zh"):
        result = run_cli("--lang", lang, "launch", "--nnodes", "abc", "x.py")
        last = " ".join(line.strip() for line in result.err.splitlines()[-2:])
        assert "errors" in last and "ddpkit explain bad-usage" in last.replace("\n", ""), last


def test_works_offline_from_an_installed_copy_without_the_docs(tmp_path: Path) -> None:
    """The entries come from the package, not from docs/: a copy of src/ddpkit alone explains."""
    import shutil

    shutil.copytree(ROOT / "src" / "ddpkit", tmp_path / "ddpkit")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANG", "LC_"))}
    env.update(PYTHONPATH=str(tmp_path), LANG="zh_CN.UTF-8")
    done = subprocess.run([sys.executable, "-m", "ddpkit", "explain", "wrong-interface"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "原因：" in done.stdout
