"""``ddpkit doctor --log``: JSON schema, exit codes, stdin, unreadable files, no torch import."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddpkit.errors import ExitCode

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
SEED = LOGS / "nccl" / "seed_connection_refused.log"
BENIGN = LOGS / "nccl" / "benign.log"
RunCli = Callable[..., Any]  # the run_cli fixture of tests/conftest.py


def test_json_document_has_exactly_the_schema_fields(run_cli: RunCli) -> None:
    result = run_cli("doctor", "--log", str(SEED), "--json")
    assert result.code == ExitCode.FAILURE
    doc = result.json()
    assert doc["schema"] == "ddpkit.doctor/1"
    assert set(doc) == {"schema", "ddpkit_version", "findings", "diagnosis"}
    # the top finding, and no rank: a plain log names none (a run directory's ranks' ends do)
    assert doc["diagnosis"]["finding"] == "wrong-interface" and doc["diagnosis"]["rank"] is None
    (finding,) = doc["findings"]
    assert set(finding) == {"id", "severity", "title", "explanation", "fix", "evidence"}
    assert finding["id"] == "wrong-interface" and finding["severity"] == "error"
    assert all(set(e) == {"file", "line", "text"} for e in finding["evidence"])
    assert finding["evidence"][0] == {
        "file": str(SEED), "line": 1,
        "text": "container-xxx:152731:152731 [1] NCCL INFO Bootstrap : Using eth0:172.17.0.4<0>",
    }
    assert "doctor:" not in result.out  # the summary line goes to stderr, never into the JSON


def test_benign_log_exits_zero_with_no_failure(run_cli: RunCli) -> None:
    result = run_cli("doctor", "--log", str(BENIGN), "--json")
    assert result.code == ExitCode.OK
    assert [f["id"] for f in result.json()["findings"]] == ["no-failure"]


def test_warnings_only_exit_zero(run_cli: RunCli) -> None:
    result = run_cli("doctor", "--log", str(LOGS / "nccl" / "node_mismatch_node0.log"),
                     str(LOGS / "nccl" / "node_mismatch_node1.log"))
    assert result.code == ExitCode.OK
    assert "warning  node-mismatch" in result.out


def test_human_output_shows_evidence_and_fix(run_cli: RunCli) -> None:
    result = run_cli("doctor", "--log", str(SEED))
    assert result.code == ExitCode.FAILURE
    assert result.out.startswith("error    wrong-interface")
    assert f"{SEED.name}:1: container-xxx" in result.out  # a long path is elided in the middle
    assert "ddpkit nccl-conf set NCCL_SOCKET_IFNAME==eth1" in result.out
    assert "most likely cause: wrong-interface" in result.err


def test_several_log_flags_and_files_accumulate(run_cli: RunCli) -> None:
    node0, node1 = LOGS / "nccl" / "wrong_interface_node0.log", LOGS / "nccl" / "wrong_interface_node1.log"
    result = run_cli("doctor", "--log", str(node0), "--log", str(node1), "--json")
    files = {e["file"] for e in result.json()["findings"][0]["evidence"]}
    assert files == {str(node0), str(node1)}


def test_unreadable_file_is_a_config_error_naming_it(run_cli: RunCli, tmp_path: Path) -> None:
    missing = tmp_path / "nope.log"
    result = run_cli("doctor", "--log", str(BENIGN), str(missing))
    assert result.code == ExitCode.CONFIG
    assert "error [log-unreadable]" in result.err and str(missing) in result.err
    assert result.out == ""  # nothing half-printed before the error


def test_fifo_without_a_writer_is_refused_within_the_bounded_wait(
        run_cli: RunCli, tmp_path: Path, monkeypatch: Any) -> None:
    import os
    import time

    from ddpkit.doctor.log import diagnose as logs

    monkeypatch.setattr(logs, "FIFO_WAIT_S", 1)
    fifo = tmp_path / "rank_0.log"
    os.mkfifo(fifo)
    started = time.monotonic()
    result = run_cli("doctor", "--log", str(fifo), "--json")
    assert time.monotonic() - started < 5
    assert result.code == ExitCode.CONFIG
    error = result.json()["error"]
    assert error["id"] == "log-unreadable" and "FIFO that no program wrote into" in error["message"]


def test_fifo_with_a_writer_is_read(run_cli: RunCli, tmp_path: Path) -> None:
    import os
    import threading

    fifo = tmp_path / "live.log"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as handle:  # blocks until doctor opens the read end
            handle.write(SEED.read_bytes())

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    result = run_cli("doctor", "--log", str(fifo), "--json")
    writer.join(timeout=10)
    assert result.json()["findings"][0]["id"] == "wrong-interface"


def test_device_is_refused_naming_the_fix(run_cli: RunCli) -> None:
    result = run_cli("doctor", "--log", "/dev/zero", "--json")
    assert result.code == ExitCode.CONFIG
    error = result.json()["error"]
    assert error["id"] == "log-unreadable" and "device" in error["message"]
    assert "ddpkit doctor --log -" in error["hint"]


def test_directory_is_unreadable(run_cli: RunCli, tmp_path: Path) -> None:
    result = run_cli("doctor", "--log", str(tmp_path), "--json")
    assert result.code == ExitCode.CONFIG
    assert result.json()["error"]["id"] == "log-unreadable"


def test_stdin_and_no_torch_import(tmp_path: Path) -> None:
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['ddpkit', 'doctor', '--log', '-', '--json']\n"
        "from ddpkit.cli.main import main\n"
        "code = main(sys.argv[1:])\n"
        "assert 'torch' not in sys.modules, 'doctor --log imported torch'\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], input=SEED.read_bytes(),
                          capture_output=True, timeout=60)
    assert proc.returncode == ExitCode.FAILURE, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["findings"][0]["id"] == "wrong-interface"
    assert doc["findings"][0]["evidence"][0]["file"] == "<stdin>"


def test_a_terminal_as_standard_input_is_told_what_is_awaited() -> None:
    # a user who runs `ddpkit doctor --log -` without a pipe is told, at once, that ddpkit waits
    # for a pasted log and how to end it, not left before a silent terminal
    pid, fd = pty.fork()
    if pid == 0:  # (the child: ddpkit with the pty as its terminal)
        os.execv(sys.executable, [sys.executable, "-m", "ddpkit", "doctor", "--log", "-"])
    try:
        said, deadline = b"", time.monotonic() + 30
        while b"Ctrl-D" not in said and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.5)[0]:
                said += os.read(fd, 4096)
        assert b"standard input" in said and b"Ctrl-D" in said, said
        for line in SEED.read_bytes().splitlines(keepends=True):  # the pasted log
            os.write(fd, line)
        os.write(fd, b"\x04")  # Ctrl-D at a line's start: the end of input
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 0.5)[0]:
                try:
                    said += os.read(fd, 4096)
                except OSError:  # (the child closed the terminal: it ended)
                    break
        assert b"wrong-interface" in said, said
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == ExitCode.FAILURE
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass  # (it ended above: nothing is left behind)
        os.close(fd)


def test_a_big_log_is_announced_before_it_is_read(run_cli: RunCli, monkeypatch: Any) -> None:
    from ddpkit.cli.commands import doctor

    monkeypatch.setattr(doctor, "LARGE_LOG_BYTES", SEED.stat().st_size)
    result = run_cli("doctor", "--log", str(SEED), str(BENIGN), "--json")
    assert f"doctor: reading {SEED} (" in result.err  # on stderr: the JSON stays one document
    assert str(BENIGN) not in result.err  # (smaller than the bound: read without a word)
    assert result.json()["diagnosis"]["finding"] == "wrong-interface"


def test_binary_input_is_read_not_rejected(run_cli: RunCli, tmp_path: Path) -> None:
    blob = tmp_path / "core.bin"
    blob.write_bytes(bytes(range(256)) * 2048)
    result = run_cli("doctor", "--log", str(blob), "--json")
    assert result.code == ExitCode.OK
    # nothing in it is a line ddpkit knows: no claim either way
    assert [(f["id"], f["severity"]) for f in result.json()["findings"]] == [("no-result",
                                                                             "warning")]


def test_truncated_mid_line_log(run_cli: RunCli, tmp_path: Path) -> None:
    cut = tmp_path / "cut.log"
    cut.write_bytes(SEED.read_bytes()[:-40])  # the last line ends halfway
    result = run_cli("doctor", "--log", str(cut), "--json")
    assert result.json()["findings"][0]["id"] == "wrong-interface"


def _local_resolver(monkeypatch: Any) -> None:
    """Keep the hostname lookup off any DNS server: answer from here."""
    monkeypatch.setattr(socket, "getaddrinfo",
                        lambda *a, **k: [(socket.AF_INET, socket.SOCK_STREAM, 6, "",
                                          ("127.0.1.1", 0))])


def test_preflight_json_rows(run_cli: RunCli, monkeypatch: Any) -> None:
    _local_resolver(monkeypatch)
    result = run_cli("doctor", "--json")
    doc = result.json()
    assert doc["schema"] == "ddpkit.doctor/1" and set(doc) == {"schema", "ddpkit_version",
                                                               "checks"}
    ids = [c["id"] for c in doc["checks"]]
    for expected in ("interface", "nccl-settings", "hostname", "master-port", "shm",
                     "open-files", "ephemeral-ports", "infiniband", "gpus", "torch"):
        assert expected in ids
    for check in doc["checks"]:
        assert set(check) == {"id", "title", "status", "detail", "fix"}
        assert check["status"] in ("pass", "warn", "fail")
        assert (check["status"] == "pass") or check["fix"] or check["id"] == "ephemeral-ports"
    hostname = next(c for c in doc["checks"] if c["id"] == "hostname")
    assert hostname["status"] == "warn" and "127.0.1.1" in hostname["detail"]
    failed = any(c["status"] == "fail" for c in doc["checks"])
    assert result.code == (ExitCode.FAILURE if failed else ExitCode.OK)


def test_preflight_table(run_cli: RunCli, monkeypatch: Any) -> None:
    _local_resolver(monkeypatch)
    result = run_cli("doctor", "--master-port", "29511")
    assert result.out.startswith("ddpkit doctor: this node")
    assert "check" in result.out and "status" in result.out
    assert "port 29511" in result.out
    assert "fixes:" in result.out  # the 127.0.1.1 hostname at least needs one


def test_preflight_rejects_a_bad_port(run_cli: RunCli) -> None:
    result = run_cli("doctor", "--master-port", "70000")
    assert result.code == ExitCode.USAGE and "error [bad-port]" in result.err
