"""The membership gate (issue 32, item 1): ranks prove the job's secret before the script runs.

Pure parts (proofs, verdicts, the kernel's connection table), then real processes running
``python -m ddpkit.workers.member_gate`` against a real c10d TCPStore on loopback, as torchrun's
agent store would be: a job whose ranks all hold the secret runs its script; one rank that does
not (a stranger's, which runs its own code and proves nothing, or forges a proof) stops every
rank before its script runs.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ddpkit.launch.torchrun.command import JOB_SECRET_ENV, MEMBER_GATE
from ddpkit.workers import member_gate as gate

KEY = gate.member_key("s3cret")
NONCE = "n0nce"


def test_the_launch_side_and_the_gate_agree_on_names() -> None:
    assert JOB_SECRET_ENV == gate.SECRET_ENV and gate.__name__ == MEMBER_GATE


def test_a_proof_checks_only_for_its_rank_address_nonce_and_key() -> None:
    good = json.dumps(gate.proof(KEY, NONCE, 2, "10.0.0.3")).encode()
    assert gate.check_proof(KEY, NONCE, 2, good) == "10.0.0.3"
    assert gate.check_proof(KEY, NONCE, 3, good) is None  # another rank's
    assert gate.check_proof(KEY, "other", 2, good) is None  # another run's nonce
    assert gate.check_proof(gate.member_key("guess"), NONCE, 2, good) is None
    moved = json.dumps({**json.loads(good), "address": "10.0.0.9"}).encode()
    assert gate.check_proof(KEY, NONCE, 2, moved) is None
    for junk in (None, b"", b"[" * 100000, b'{"rank": 2}', b"\xff\xfe", b"null"):
        assert gate.check_proof(KEY, NONCE, 2, junk) is None


def test_a_signed_value_opens_only_with_its_key_and_nonce() -> None:
    raw = gate.signed(KEY, NONCE, {"ok": True})
    assert gate.opened(KEY, NONCE, raw) == {"ok": True}
    assert gate.opened(KEY, "x", raw) is None and gate.opened(gate.member_key("x"), NONCE, raw) is None
    forged = json.dumps({"body": '{"ok":true}', "mac": "0" * 64}).encode()
    assert gate.opened(KEY, NONCE, forged) is None


def _proc_hex(address: str, port: int) -> str:
    """An IPv4 address and port as the kernel writes them in /proc/net/tcp (little-endian)."""
    octets = [int(x) for x in address.split(".")]
    return "".join(f"{o:02X}" for o in reversed(octets)) + f":{port:04X}"


def _table(*rows: tuple[str, int, str, int, str]) -> str:
    header = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
              "timeout inode\n")
    return header + "".join(
        f"   {i}: {_proc_hex(la, lp)} {_proc_hex(ra, rp)} {st} 00000000:00000000 00:00000000 "
        f"00000000     0        0 {1000 + i} 1 0000000000000000 20 4 30 10 -1\n"
        for i, (la, lp, ra, rp, st) in enumerate(rows))


def test_connections_to_the_port_are_read_from_the_kernels_table() -> None:
    table = _table(("0.0.0.0", 29500, "0.0.0.0", 0, "0A"),  # the listener
                   ("10.0.0.1", 29500, "10.0.0.2", 40000, "01"),  # node 1
                   ("10.0.0.1", 29500, "10.0.0.9", 40001, "01"),  # someone else
                   ("10.0.0.1", 29500, "10.0.0.1", 40002, "01"),  # node 0 itself, by its address
                   ("10.0.0.1", 40002, "10.0.0.1", 29500, "01"),
                   ("127.0.0.1", 29500, "127.0.0.1", 40003, "01"),  # node 0 over loopback
                   ("10.0.0.1", 22, "10.0.0.8", 50000, "01"),  # another port
                   ("10.0.0.1", 29500, "10.0.0.7", 40004, "06"))  # TIME_WAIT: gone
    assert gate.peers_of_port([table], 29500) == {"10.0.0.2", "10.0.0.9"}
    six = ("  sl  local_address                         remote_address\n"
           "   0: 0000000000000000FFFF00000100000A:7332 0000000000000000FFFF00000900000A:9C40 01 "
           "00000000:00000000 00:00000000 00000000 0 0 1 1\n")
    assert gate.peers_of_port([six], 29490) == {"10.0.0.9"}  # IPv4-mapped, as libuv's "::"


def test_the_verdict_names_a_stranger_and_the_ranks_that_proved_nothing() -> None:
    proofs: dict[int, bytes | None] = {
        r: json.dumps(gate.proof(KEY, NONCE, r, "10.0.0.1" if r < 2 else "10.0.0.2")).encode()
        for r in range(4)}
    assert gate.verdict(KEY, NONCE, 4, proofs, {"10.0.0.2"})["ok"]
    found = gate.verdict(KEY, NONCE, 4, {**proofs, 2: None, 3: b"junk"}, {"10.0.0.9"})
    assert not found["ok"] and found["missing"] == [2, 3] and found["strangers"] == ["10.0.0.9"]
    text = gate.describe_failure(found, 29500)
    assert "rank(s) 2, 3" in text and "10.0.0.9" in text and "port 29500" in text
    late = gate.verdict(KEY, NONCE, 4, proofs, {"10.0.0.2", "10.0.0.9"})  # the real node came too
    assert not late["ok"] and late["strangers"] == ["10.0.0.9"] and late["missing"] == []


def test_the_entry_runs_as_torchrun_would_have_run_it() -> None:
    orig = [sys.executable, "-u", "-m", gate.__name__, "train.py", "--lr", "1"]
    assert gate.entry_argv(orig, ["train.py", "--lr", "1"]) == [sys.executable, "-u", "train.py",
                                                                 "--lr", "1"]
    orig = [sys.executable, "-u", "-m", gate.__name__, "--module", "pkg.train", "x"]
    assert gate.entry_argv(orig, ["--module", "pkg.train", "x"]) == [sys.executable, "-u", "-m",
                                                                      "pkg.train", "x"]


# -- real processes against a real TCPStore ------------------------------------------------------


@pytest.fixture
def agent_store(tcp_port: int) -> Iterator[tuple[Any, int]]:
    pytest.importorskip("torch")
    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    store = TCPStore("127.0.0.1", tcp_port, None, True, datetime.timedelta(seconds=30))
    yield store, tcp_port
    del store


SCRIPT = """import json, os, sys
out = os.environ["OUT"]
with open(out + "/" + os.environ["RANK"], "w") as f:
    json.dump({"argv": sys.argv, "secret": "DDPKIT_JOB_SECRET" in os.environ,
               "pid": os.getpid()}, f)
"""


def _rank(rank: int, world: int, port: int, tmp_path: Path, secret: str) -> subprocess.Popen[str]:
    env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(port), gate.SECRET_ENV: secret, gate.WAIT_ENV: "3",
           "OUT": str(tmp_path)}
    return subprocess.Popen([sys.executable, "-u", "-m", gate.__name__, str(tmp_path / "train.py"),
                             "--lr", "0.1"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(procs: list[subprocess.Popen[str]]) -> list[tuple[int, str]]:
    try:
        return [(p.wait(60), (p.stderr.read() if p.stderr else "")) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert all(p.poll() is not None for p in procs), "a rank was left running"


@pytest.mark.timeout(120)
def test_ranks_that_all_hold_the_secret_run_the_script_in_the_same_process(
        agent_store: tuple[Any, int], tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    procs = [_rank(r, 3, agent_store[1], tmp_path, "s3cret") for r in range(3)]
    results = _finish(procs)
    assert [code for code, _ in results] == [0, 0, 0], results
    for rank, proc in enumerate(procs):
        ran = json.loads((tmp_path / str(rank)).read_text())
        assert ran["argv"][1:] == ["--lr", "0.1"] and ran["argv"][0].endswith("train.py")
        assert ran["secret"] is False, "the script must not see the job's secret"
        assert ran["pid"] == proc.pid  # exec: torchrun still watches the process it started


@pytest.mark.timeout(120)
@pytest.mark.parametrize("stranger", ["silent", "wrong-secret", "forged-proof"])
def test_one_rank_without_the_secret_stops_every_rank_before_its_script(
        agent_store: tuple[Any, int], tmp_path: Path, stranger: str) -> None:
    store, port = agent_store
    (tmp_path / "train.py").write_text(SCRIPT)
    procs = [_rank(r, 3, port, tmp_path, "s3cret") for r in range(2)]
    if stranger == "wrong-secret":
        procs.append(_rank(2, 3, port, tmp_path, "guessed"))
    elif stranger == "forged-proof":  # the stranger copies rank 1's proof under its own rank
        store.set(gate.proof_key(2), json.dumps({"rank": 2, "address": "127.0.0.1",
                                                 "mac": "0" * 64}))
    results = _finish(procs)
    assert [code for code, _ in results] == [gate.EXIT_CODE] * len(procs), results
    assert not any((tmp_path / str(r)).exists() for r in range(3)), "a script ran"
    assert "membership check failed" in results[0][1]
    if stranger != "wrong-secret":
        assert "rank(s) 2 did not prove" in results[0][1] and "rank(s) 2" in results[1][1]
