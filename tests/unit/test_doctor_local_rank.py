"""doctor --log names the old local-rank contract's failures (tests/fixtures/logs/legacy/, sources
in its SOURCES.md): real torch 2.13 launcher output captured here, and log lines from public
threads."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.log.diagnose import diagnose

LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "legacy"


@pytest.mark.parametrize(("name", "phrase"), [
    ("launch_dash_rejected.log", "ddp.py rejected --local-rank=N"),
    ("thread_tecogan_31.log", "main.py rejected --local-rank=N"),
    ("thread_vlpd_6.log", "trainval_distributed.py rejected --local-rank=N"),
    ("thread_cpt_65.log", "train_adgen.py rejected --local_rank=N"),
    ("thread_act3d_26.log", "main_keypose.py requires --local_rank"),
    ("torchrun_local_rank_minus_one.log", "while its local rank was -1"),
])
def test_the_old_contract_is_named_first_with_the_fix(name: str, phrase: str) -> None:
    findings = diagnose([str(LEGACY / name)])
    first = findings[0]
    assert first.id == "local-rank-argument", [f.id for f in findings]
    assert phrase in first.explanation
    assert "ddpkit launch" in first.fix and 'os.environ["LOCAL_RANK"]' in first.fix
    lines = (LEGACY / name).read_text().splitlines()
    assert first.evidence
    for item in first.evidence:
        assert item.text.rstrip("…") in lines[item.line - 1]


def test_the_rank_failure_is_still_reported_after_it() -> None:
    ids = [f.id for f in diagnose([str(LEGACY / "launch_dash_rejected.log")])]
    assert ids.index("local-rank-argument") < ids.index("rank-failed")


def test_an_invalid_device_ordinal_alone_is_not_blamed_on_the_argument() -> None:
    # No sign of local rank -1: more GPUs asked for than visible is as likely.
    findings = diagnose([str(LEGACY / "thread_simxns_2.log")])
    assert "local-rank-argument" not in [f.id for f in findings]


def test_a_minus_one_in_another_file_does_not_count(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("Namespace(local_rank=-1, lr=0.1)\n")
    (tmp_path / "b.log").write_text("RuntimeError: CUDA error: invalid device ordinal\n")
    findings = diagnose([str(tmp_path / "a.log"), str(tmp_path / "b.log")])
    assert "local-rank-argument" not in [f.id for f in findings]
    (tmp_path / "b.log").write_text("torch.cuda.set_device(-1)\n"
                                    "RuntimeError: CUDA error: invalid device ordinal\n")
    assert diagnose([str(tmp_path / "b.log")])[0].id == "local-rank-argument"


@pytest.mark.parametrize("line", [
    "train.py: error: unrecognized arguments: --local_rank=3",
    "Error: unrecognized arguments: \u2013local_rank=19",  # a thread's copy: no name, an en dash
    "error: unrecognized arguments: \u2014local-rank=0",
])
def test_argparse_s_rejection_is_read_in_a_thread_s_copy_too(tmp_path: Path, line: str) -> None:
    log = tmp_path / "run.log"
    log.write_text(line + "\n")
    top = diagnose([str(log)])[0]
    assert (top.id, top.severity) == ("local-rank-argument", "error")
    assert "\u2013" not in top.explanation and "\u2014" not in top.explanation
    assert "--local" in top.explanation


def test_argparse_s_rejection_of_another_flag_is_not_the_local_rank(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("Error: unrecognized arguments: \u2013batch_size=19\n")
    assert diagnose([str(log)])[0].id != "local-rank-argument"
