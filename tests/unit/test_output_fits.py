"""The README's commands print nothing wider than 100 display columns when the output is not a
terminal (issue 21: `bench --quick` printed lines of up to 460 columns, `test --nproc-per-node 4` a
136-column table). The sim's jobs are checked where the sim tests already run them."""

from __future__ import annotations

import argparse
import io
import shutil
import tempfile
from pathlib import Path

import pytest

from ddpkit.cli.command_table import COMMANDS, build_parser
from ddpkit.cli.commands.test import _print_verdict
from ddpkit.cli.output.console import Console
from ddpkit.clustertest import CHECK_ORDER, TestVerdict

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LOGS = sorted(p for p in (FIXTURES / "logs").rglob("*.log"))


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _parsers(sub)
    return found


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_help_fits(command: str, assert_fits) -> None:  # type: ignore[no-untyped-def]
    parser, _ = build_parser(command)
    for each in _parsers(parser):
        assert_fits(each.format_help())


def test_top_level_help_fits(run_cli, assert_fits) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("--help")
    assert result.code == 0
    assert_fits(result.out, result.err)


@pytest.mark.parametrize("argv", [
    ("nics",), ("nics", "--to", "127.0.0.1"), ("nccl-conf", "show"), ("doctor",),
    ("plan", "--params", "7B", "--nodes", "2", "--gpus-per-node", "8", "--inter-node", "25Gbit",
     "--intra-node", "300GB/s", "--step-compute", "0.8s"),
    ("plan", "--params", "7B", "--nodes", "2", "--gpus-per-node", "8", "--inter-node", "10Gbit",
     "--step-compute", "1.5s", "--grad-dtype", "bf16", "--gpu", "4090", "--micro-batch", "1",
     "--seq-len", "2048"),
    ("plan", "--model-bytes", "14GB", "--grad-dtype", "bf16", "--inter-node", "10Gb/s"),
])
def test_readme_commands_fit(argv: tuple[str, ...], run_cli, assert_fits) -> None:  # type: ignore[no-untyped-def]
    result = run_cli(*argv)
    assert result.code in (0, 1), result.err  # 1: a check found a problem on this machine
    assert result.out.strip()
    assert_fits(result.out, result.err)


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_doctor_log_output_fits(log: Path, run_cli, assert_fits) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("doctor", "--log", str(log))
    assert result.code in (0, 1), result.err
    assert_fits(result.out, result.err)


def test_doctor_log_output_fits_from_a_deep_folder(tmp_path: Path, run_cli,  # type: ignore[no-untyped-def]
                                                    assert_fits) -> None:
    # torchrun's --log-dir runs deep (logs/none_<id>/attempt_0/0/stderr.log), and a finding's
    # words cite it as (path:line): CI's clone, 8 columns deeper than ours, showed it at 104
    start = FIXTURES / "logs" / "torchrun-cpu" / "twice" / "logs" / "none_hmm77t08"
    deep = tmp_path.joinpath(*["a-project-folder-deep-in-a-rented-instance"] * 2, "none_hmm77t08")
    shutil.copytree(start, deep)
    result = run_cli("doctor", "--log", str(deep / "attempt_0" / "0" / "stderr.log"))
    assert result.code == 1, result.err
    assert_fits(result.out, result.err)
    assert "stderr.log:12)" in result.out  # the place is cut at a separator, not left out


def test_doctor_log_cuts_long_evidence_with_an_ellipsis(tmp_path: Path, run_cli,  # type: ignore[no-untyped-def]
                                                        assert_fits) -> None:
    log = tmp_path / "node0.log"
    log.write_text("node0:123:456 [0] NCCL INFO NET/Socket : Using [0]eth1:10.0.0.2<0>\n"
                   "node0:123:456 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
                   "10.0.0.3<43210> failed : Connection refused " + "x" * 200 + "\n")
    result = run_cli("doctor", "--log", str(log))
    assert_fits(result.out, result.err)
    evidence = [line for line in result.out.splitlines() if "node0.log:2:" in line]
    assert evidence and all(line.endswith("…") for line in evidence)


@pytest.mark.parametrize("argv", [
    ("launch", "--dry-run", "--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1",
     "--nproc-per-node", "8", "{script}", "--lr", "0.1"),
    ("launch", "--dry-run", "{script}", "--lr", "0.1"),
    ("test", "--dry-run", "--nproc-per-node", "4"),
    ("test", "--dry-run", "--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1"),
    ("bench", "--dry-run", "--quick"),
    ("bench", "--dry-run", "--quick", "--nnodes", "2", "--node-rank", "0", "--master-addr",
     "127.0.0.1"),
])
def test_dry_runs_fit(argv: tuple[str, ...], monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
                      run_cli, assert_fits) -> None:
    # The run directory's paths are arguments of the commands shown, and one argument is never
    # cut: a project directory as deep as /root/my-project-name (pytest's own is deeper).
    with tempfile.TemporaryDirectory(prefix="proj-", dir="/tmp") as work:
        monkeypatch.chdir(work)
        Path(work, "train.py").write_text("import torch.distributed\n")
        result = run_cli(*(a.replace("{script}", "train.py") for a in argv))
    assert result.code == 0, result.err
    assert_fits(result.out, result.err)
    assert "command:" in result.out and result.out.count(" \\\n") >= 2  # split to fit, pasteable


def _rank(rank: int, host: str) -> dict[str, object]:
    checks = [{"name": n, "ok": True, "detail": f"{n}: checked on every rank, bit-identical "
               "across the world of 8 ranks, 4 per node"} for n in CHECK_ORDER]
    return {"rank": rank, "host": host, "checks": checks, "interfaces_used": ["eth1"],
            "bandwidth": [{"bytes": 4 << 20, "busbw_gbps": 0.75}]}


def test_four_ranks_verdict_table_fits(assert_fits) -> None:  # type: ignore[no-untyped-def]
    ranks = tuple(_rank(r, f"autodl-container-{r // 2}f8e2a1b7c") for r in range(4))
    verdict = TestVerdict(ok=True, nodes=2, ranks_per_node=2, world_size=4, ranks=ranks,
                          missing_ranks=(), stages={}, complete=True)
    out = io.StringIO()
    _print_verdict(Console(out=out, err=io.StringIO(), color=False), verdict)
    text = out.getvalue()
    assert_fits(text)
    for row in CHECK_ORDER:
        assert any(line.startswith(row) for line in text.splitlines())


def test_colour_does_not_count_as_width(assert_fits) -> None:  # type: ignore[no-untyped-def]
    from ddpkit.cli.output import render

    out = io.StringIO()
    console = Console(out=out, err=io.StringIO(), color=True, width=60)
    render.table(console, ("check", "status", "detail"),
                 [("route", render.style(console, "pass", "ok"), "x" * 40)] * 3)
    lines = out.getvalue().splitlines()
    assert_fits(out.getvalue(), columns=60)
    assert len({len(line) for line in lines[1:]}) == 1  # same escapes in every row: aligned


def test_bench_report_fits(assert_fits) -> None:  # type: ignore[no-untyped-def]
    from test_bench_run_merge import GOOD_DOCS, _payload

    from ddpkit.cli.output.bench_tables import show_bench as show

    out = io.StringIO()
    show(Console(out=out, err=io.StringIO(), color=False), _payload(GOOD_DOCS))
    assert "busbw" in out.getvalue()
    assert_fits(out.getvalue())
