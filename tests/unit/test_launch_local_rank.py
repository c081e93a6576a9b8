"""The legacy local-rank argument: read from the script's source with ast, never run or imported."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from ddpkit.errors import UsageError
from ddpkit.launch.torchrun.command import LOCAL_RANK_MACRO
from ddpkit.launch.torchrun.entry_file import find_module_file, read_entry
from ddpkit.launch.torchrun.local_rank import MAX_SOURCE_BYTES, EntrySource, decide, declarations


def _src(text: str) -> EntrySource:
    return EntrySource("train.py", textwrap.dedent(text).encode())


# The way guides write it (argparse, a group, aliases, click), and ways that must not count.
GUIDE = """
    import argparse, torch
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()
    torch.cuda.set_device(args.local_rank)
"""


def test_underscore_declared_is_passed_with_its_line() -> None:
    choice = decide("auto", _src(GUIDE))
    assert choice.flag == "--local_rank"
    assert (choice.file, choice.line) == ("train.py", 5)
    assert "train.py:5" in choice.reason
    assert choice.argument(LOCAL_RANK_MACRO) == "--local_rank=${local_rank}"


def test_dash_declared_on_an_argument_group() -> None:
    choice = decide("auto", _src("""
        import argparse
        p = argparse.ArgumentParser()
        dist = p.add_argument_group("distributed")
        dist.add_argument(
            "--local-rank",
            type=int,
        )
    """))
    assert (choice.flag, choice.line) == ("--local-rank", 6)


def test_both_spellings_as_aliases_pass_the_dashed_one() -> None:
    choice = decide("auto", _src("""
        import argparse
        p = argparse.ArgumentParser()
        p.add_argument("--local_rank", "--local-rank", type=int, default=0)
    """))
    assert choice.flag == "--local-rank"
    assert "both" in choice.reason


def test_an_alias_of_another_option_counts() -> None:
    found = declarations('import argparse\np = argparse.ArgumentParser()\n'
                         'p.add_argument("--gpu", "--local_rank", dest="gpu", type=int)\n')
    assert [(d.flag, d.line) for d in found] == [("--local_rank", 3)]


def test_dest_alone_declares_no_option() -> None:
    # dest="local_rank" makes args.local_rank, but the option is --rank: passing --local_rank
    # would be rejected, so nothing is passed.
    choice = decide("auto", _src("""
        import argparse
        p = argparse.ArgumentParser()
        p.add_argument("--rank", dest="local_rank", type=int)
        args = p.parse_args()
    """))
    assert choice.flag is None
    assert "declares neither" in choice.reason


def test_strings_outside_add_argument_do_not_count() -> None:
    choice = decide("auto", _src("""
        import os
        HELP = "--local_rank is what torch.distributed.launch used to pass"
        print("--local-rank")
        local_rank = int(os.environ["LOCAL_RANK"])
    """))
    assert choice.flag is None


def test_click_option_counts() -> None:
    choice = decide("auto", _src("""
        import click
        @click.command()
        @click.option("--local_rank", type=int, default=0)
        def main(local_rank): ...
    """))
    assert choice.flag == "--local_rank"


def test_env_reading_script_gets_nothing() -> None:
    choice = decide("auto", _src("import os\nlocal_rank = int(os.environ['LOCAL_RANK'])\n"))
    assert choice.flag is None and choice.warning is None


def test_a_syntax_error_passes_nothing_with_a_warning() -> None:
    choice = decide("auto", _src("import argparse\np.add_argument('--local_rank'\nprint('x'\n"))
    assert choice.flag is None
    assert choice.warning and "does not parse" in choice.warning
    assert "SyntaxError" in choice.reason


def test_null_bytes_and_odd_encodings() -> None:
    assert decide("auto", EntrySource("b.py", b"\x00\x01binary")).flag is None
    latin = "# -*- coding: latin-1 -*-\nimport argparse\nargparse.ArgumentParser()" \
            ".add_argument('--local_rank')\nx = 'caf\xe9'\n"
    assert decide("auto", EntrySource("l.py", latin.encode("latin-1"))).flag == "--local_rank"


def test_deeply_nested_source_does_not_crash() -> None:
    choice = decide("auto", EntrySource("deep.py", b"x = " + b"(" * 100_000 + b")" * 100_000))
    assert choice.flag is None and choice.warning


def test_explicit_modes_and_use_env() -> None:
    assert decide("dash", None).flag == "--local-rank"
    assert decide("underscore", None).flag == "--local_rank"
    assert decide("none", _src(GUIDE)).flag is None
    assert decide("auto", _src(GUIDE), use_env=True).flag is None
    with pytest.raises(UsageError) as info:
        decide("underscore", None, use_env=True)
    assert info.value.error_id == "local-rank-arg-conflict"


def test_a_user_who_passes_it_already_gets_no_second_one() -> None:
    choice = decide("auto", _src(GUIDE), ("--local_rank=0", "--lr", "1"))
    assert choice.flag is None and "already contain --local_rank" in choice.reason


# --- reading the file (I/O) ----------------------------------------------------------------------


def test_unreadable_or_missing_file_passes_nothing_with_a_warning(tmp_path: Path) -> None:
    missing = decide("auto", read_entry("nope.py", cwd=tmp_path))
    assert missing.flag is None and missing.warning and "cannot read nope.py" in missing.warning
    locked = tmp_path / "locked.py"
    locked.write_text(textwrap.dedent(GUIDE))
    locked.chmod(0)
    try:
        # root reads a mode-000 file; reading /proc/self/mem at offset 0 fails for anyone (EIO)
        source = read_entry("/proc/self/mem" if os.geteuid() == 0 else "locked.py", cwd=tmp_path)
    finally:
        locked.chmod(0o644)
    assert source.data is None and source.problem and "cannot read" in source.problem


@pytest.mark.timeout(10)
def test_a_fifo_or_device_is_not_read_so_nothing_hangs(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    assert "not a regular file" in (read_entry("pipe.py", cwd=tmp_path).problem or "")
    assert "not a regular file" in (read_entry("/dev/zero", cwd=tmp_path).problem or "")
    assert "not a regular file" in (read_entry(".", cwd=tmp_path).problem or "")  # a directory


def test_a_huge_file_is_not_read(tmp_path: Path) -> None:
    big = tmp_path / "big.py"
    with open(big, "wb") as handle:
        handle.write(b"import argparse\nargparse.ArgumentParser().add_argument('--local_rank')\n")
        handle.truncate(MAX_SOURCE_BYTES + 10)
    source = read_entry("big.py", cwd=tmp_path)
    assert source.data is None and "larger than" in (source.problem or "")
    choice = decide("auto", source)
    assert choice.flag is None and choice.warning and "--local-rank-arg" in choice.warning


def test_module_is_found_without_importing_its_packages(tmp_path: Path) -> None:
    pkg = tmp_path / "proj" / "train"
    pkg.mkdir(parents=True)
    marker = tmp_path / "imported"
    for directory in (tmp_path / "proj", pkg):  # an __init__ that would leave a trace if run
        (directory / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    (pkg / "main.py").write_text(textwrap.dedent(GUIDE))
    source = read_entry("proj.train.main", cwd=tmp_path, is_module=True)
    assert source.path == str(pkg / "main.py")
    assert decide("auto", source).flag == "--local_rank"
    assert not marker.exists(), "resolving the module ran a package's __init__"


def test_package_module_runs_its_main_and_pythonpath_is_searched(tmp_path: Path) -> None:
    elsewhere = tmp_path / "lib"
    (elsewhere / "tool").mkdir(parents=True)
    (elsewhere / "tool" / "__init__.py").write_text("")
    (elsewhere / "tool" / "__main__.py").write_text(
        "import argparse\nargparse.ArgumentParser().add_argument('--local-rank')\n")
    source = read_entry("tool", cwd=tmp_path, is_module=True, env={"PYTHONPATH": str(elsewhere)})
    assert decide("auto", source).flag == "--local-rank"
    assert find_module_file("no.such.module", [str(tmp_path)]) is None
    assert "was not found" in (read_entry("nosuch", cwd=tmp_path, is_module=True).problem or "")


def test_no_python_reads_python_executables_only(tmp_path: Path) -> None:
    shell = tmp_path / "run.sh"
    shell.write_text("#!/bin/sh\necho --local_rank\n")
    script = tmp_path / "train"
    script.write_text("#!/usr/bin/env python3\nimport argparse\n"
                      "argparse.ArgumentParser().add_argument('--local_rank')\n")
    assert read_entry("run.sh", cwd=tmp_path, no_python=True).data is None
    assert decide("auto", read_entry("train", cwd=tmp_path, no_python=True)).flag == "--local_rank"
    script.chmod(0o755)
    on_path = read_entry("train", cwd=Path("/"), no_python=True, env={"PATH": str(tmp_path)})
    assert on_path.path == str(script)


def test_the_macro_is_torchs_own() -> None:
    macros = pytest.importorskip("torch.distributed.elastic.utils.api").macros
    assert macros.local_rank == LOCAL_RANK_MACRO
    assert macros.substitute(["--local_rank=" + LOCAL_RANK_MACRO], "3") == ["--local_rank=3"]
