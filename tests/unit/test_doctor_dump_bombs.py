"""Crafted flight-recorder dumps (issue 22): shared references, a 240 MB field, deep nesting, a
huge integer and control characters are read quickly and shown bounded, and a bad dump is one
finding next to the others, never the end of the diagnosis.

The dumps are built with pickle's own protocol: ``pickle.dumps`` where it can write the value
(it writes a shared reference once), pickle's opcodes by hand where it cannot (a million levels
of nesting, which ``pickle.dumps`` itself refuses with RecursionError).
"""

from __future__ import annotations

import json
import pickle
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ddpkit.doctor.log import flight_recorder as fr
from ddpkit.doctor.log.bounded import MAX_INT_BITS, text
from ddpkit.doctor.log.diagnose import diagnose
from ddpkit.errors import ExitCode

pytestmark = pytest.mark.timeout(120)
RunCli = Callable[..., Any]


def _entry(seq: int, op: object, **fields: object) -> dict[str, Any]:
    return {"collective_seq_id": seq, "is_p2p": False, "pg_id": 0, "process_group": ("0", "pg"),
            "profiling_name": op, "input_sizes": [[4]], "state": "started",
            "frames": [{"filename": "/home/u/train.py", "line": 7, "name": "step"}], **fields}


def _dump(folder: Path, rank: int, entries: list[Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rank_{rank}"
    path.write_bytes(pickle.dumps({"entries": entries, "pg_status": {}}, protocol=2))
    return path


def _shared_reference_bomb() -> tuple[bytes, int]:
    """A dump of a few hundred bytes whose str() is gigabytes; and that length."""
    value: object = "AAAAAAAA"
    shown = len(repr(value))
    for _ in range(6):
        value = [value] * 24  # the same list 24 times: pickle writes it once, then 2-byte refs
        shown = 2 + 24 * shown + 23 * 2
    bomb = _entry(1, value, input_sizes=[value],
                  frames=[{"filename": value, "line": value, "name": value}])
    other_group = _entry(2, "nccl:all_reduce", process_group=(value, "pg"))
    return pickle.dumps({"entries": [bomb, other_group, value], "pg_status": {"0": value}},
                        protocol=2), shown


def test_the_shared_reference_bomb_is_read_in_seconds_in_little_memory(tmp_path: Path) -> None:
    data, expanded = _shared_reference_bomb()
    assert len(data) < 1024 and expanded > 2 * 10**9  # what str() would have built
    (tmp_path / "rank_0").write_bytes(data)
    _dump(tmp_path, 1, [_entry(1, "nccl:all_reduce")])
    # Measured in a child, capped at 1 GiB of address space so that a reader which expands the
    # references fails there instead of taking the machine's memory. The peak is what Python
    # allocated while reading (ru_maxrss would carry over this pytest process's own, via fork).
    child = textwrap.dedent(f"""
        import json, resource, time, tracemalloc
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from ddpkit.doctor.log import flight_recorder as fr
        tracemalloc.start()
        start = time.monotonic()
        found = fr.findings(fr.dump_files({str(tmp_path)!r}))
        took = time.monotonic() - start
        peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
        print(json.dumps({{"took": took, "peak_mb": peak_mb,
                          "found": [f.to_dict() for f in found]}}))
    """)
    run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=90)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    assert result["took"] < 5 and result["peak_mb"] < 200, result
    (hung,) = result["found"]
    assert hung["id"] == "job-hung" and "rank 0 called [[[[[['AAAAAAAA', " in hung["explanation"]
    assert len(hung["explanation"]) < 5000 and "…" in hung["explanation"]


def test_a_240_mb_field_is_shown_cut_and_the_command_ends(run_cli: RunCli, tmp_path: Path) -> None:
    big = 240 * 1024 * 1024
    head = pickle.dumps({"entries": [_entry(1, "PLACEHOLDER")], "pg_status": {}}, protocol=2)
    # the op's BINUNICODE (opcode X, 4-byte length) replaced by one of 240 MB, in place
    small = b"X" + struct.pack("<I", len("PLACEHOLDER")) + b"PLACEHOLDER"
    assert head.count(small) == 1
    before, after = head.split(small)
    with open(tmp_path / "rank_0", "wb") as out:
        out.write(before + b"X" + struct.pack("<I", big) + b"nccl:")
        for _ in range(big // (1 << 20)):
            out.write(b"A" * (1 << 20))
        out.seek(-5, 1)  # the field is exactly ``big`` bytes: "nccl:" and then the As
        out.write(after)
    _dump(tmp_path, 1, [_entry(1, "nccl:all_reduce")])
    result = run_cli("doctor", "--log", str(tmp_path))
    assert result.code == ExitCode.FAILURE, result.err
    assert "rank 0 called nccl:AAAA" in result.out and "…" in result.out
    assert len(result.out) < 20_000


def _deep_list_pickle(depth: int, inner: bytes) -> bytes:
    """``[[[...inner...]]]``, ``depth`` levels, written with opcodes (no recursion anywhere)."""
    return pickle.EMPTY_LIST * depth + inner + pickle.APPEND * depth


def _dump_with_op(op_pickle: bytes) -> bytes:
    """{"entries": [{"collective_seq_id": 1, "pg_id": 0, "profiling_name": <op>}]} by hand."""
    def key(name: str) -> bytes:
        return pickle.SHORT_BINUNICODE + bytes([len(name)]) + name.encode()
    return (pickle.PROTO + b"\x04" + pickle.EMPTY_DICT + key("entries") + pickle.EMPTY_LIST
            + pickle.EMPTY_DICT + pickle.MARK
            + key("collective_seq_id") + pickle.BININT1 + b"\x01"
            + key("pg_id") + pickle.BININT1 + b"\x00"
            + key("profiling_name") + op_pickle
            + pickle.SETITEMS + pickle.APPEND + pickle.SETITEM + pickle.STOP)


def test_a_million_levels_of_nesting_is_shown_to_a_few_and_nothing_crashes(
        tmp_path: Path) -> None:
    depth = 1_000_000
    (tmp_path / "rank_0").write_bytes(_dump_with_op(_deep_list_pickle(depth, pickle.NONE)))
    _dump(tmp_path, 1, [_entry(1, "nccl:all_reduce")])
    with open(tmp_path / "rank_0", "rb") as handle, pytest.raises(RecursionError):
        str(fr._PlainValues(handle).load())  # what the old reader did with it
    found = diagnose([str(tmp_path)])
    assert [f.id for f in found] == ["job-hung"]
    assert "rank 0 called [[[[[[[[[…]]]]]]]]] []" in found[0].explanation


def test_a_huge_integer_is_shown_by_its_size(tmp_path: Path) -> None:
    huge = 7 ** 200_000  # 561,530 bits: str() refuses it (and would take quadratic time)
    with pytest.raises(ValueError):
        str(huge)
    _dump(tmp_path, 0, [_entry(1, huge), _entry(huge, "nccl:broadcast")])
    _dump(tmp_path, 1, [_entry(1, "nccl:all_reduce")])
    found = fr.findings(fr.dump_files(str(tmp_path)))
    assert [f.id for f in found] == ["job-hung"]
    assert f"rank 0 called <an integer of {huge.bit_length()} bits>" in found[0].explanation
    assert "nccl:broadcast" not in found[0].explanation  # a sequence number that large: skipped
    assert text(2 ** MAX_INT_BITS - 1, 100) == str(2 ** MAX_INT_BITS - 1)


def test_control_characters_never_reach_the_terminal(run_cli: RunCli, tmp_path: Path) -> None:
    evil = "nccl:all_reduce\x1b]0;pwned\x07\x1b[2J\x9b31m\r\x00"
    frames = [{"filename": "/home/u/\x1b[8mtrain.py", "line": "7\x1b[1A", "name": "st\x07ep"}]
    _dump(tmp_path, 0, [_entry(1, evil, frames=frames)])
    _dump(tmp_path, 1, [_entry(1, "nccl:broadcast")])
    result = run_cli("doctor", "--log", str(tmp_path))
    assert result.code == ExitCode.FAILURE
    assert "called nccl:all_reduce [[4]] at train.py:7 (step)" in result.out
    assert not any(ch in result.out for ch in "\x1b\x07\x9b\r\x00")


def test_a_bad_dump_is_one_finding_next_to_what_the_others_show(
        run_cli: RunCli, tmp_path: Path) -> None:
    done = _entry(1, "nccl:all_reduce", state="completed")
    _dump(tmp_path, 0, [done, _entry(2, "nccl:all_reduce")])
    _dump(tmp_path, 1, [done])
    (tmp_path / "rank_2").write_bytes(b"\x80\x04\x95garbage")  # cut short
    (tmp_path / "rank_3").write_bytes(pickle.dumps({"entries": [Path("/")]}, protocol=2))
    result = run_cli("doctor", "--log", str(tmp_path), "--json")
    assert result.code == ExitCode.FAILURE, result.err
    found = result.json()["findings"]
    assert [f["id"] for f in found] == ["job-hung", "dump-unreadable", "dump-unreadable"]
    assert "rank 1 never called collective #2" in found[0]["explanation"]
    assert "rank_2: not a readable flight-recorder dump" in found[1]["explanation"]
    assert "plain values only" in found[2]["explanation"]
    alone = run_cli("doctor", "--log", str(tmp_path / "rank_2"), "--json")
    assert alone.code == ExitCode.OK and [f["id"] for f in alone.json()["findings"]] == [
        "dump-unreadable"]
