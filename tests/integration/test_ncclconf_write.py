"""Real writes of nccl.conf: a writer SIGKILLed mid-write, read-only places, set/show round trip.

Each child process has a timeout and is reaped here; the read-only tests build their read-only
place themselves (a tmpfs remounted read-only inside a private mount namespace, or an immutable
directory) and undo it even on failure.
"""

from __future__ import annotations

import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddpkit.errors import ExitCode
from ddpkit.ncclconf.atomic import is_temp_name, write_atomic
from ddpkit.ncclconf.effective import load_effective

IS_ROOT = os.geteuid() == 0
OLD = b"# provider settings\nNCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME=eth0\n"
NEW = b"# provider settings\nNCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME==eth1\n" + b"# pad\n" * 20000

# A writer that stops between "temporary file complete" and "rename", and says where it is.
PAUSED_WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from ddpkit.ncclconf.atomic import write_atomic

    def pause(tmp):
        print(tmp, flush=True)
        time.sleep(120)

    write_atomic(Path(sys.argv[1]), Path(sys.argv[2]).read_bytes(), before_replace=pause)
""")

# A writer that rewrites the file in a loop, alternating between two big versions.
LOOPING_WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from ddpkit.ncclconf.atomic import write_atomic

    versions = [Path(sys.argv[2]).read_bytes(), Path(sys.argv[3]).read_bytes()]
    print("started", flush=True)
    i = 0
    while True:
        write_atomic(Path(sys.argv[1]), versions[i % 2])
        i += 1
""")


def child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("NCCL_", "GLOO_", "TORCH_", "PET_", "MASTER_", "DDPKIT_"))}


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts; every one is killed and reaped at the end, whatever happened."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    assert all(p.returncode is not None for p in started)


def start(children: list[subprocess.Popen[str]], script: str, *args: str
          ) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                            text=True, env=child_env())
    children.append(proc)
    return proc


def read_line(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "child did not report in time"
    line = proc.stdout.readline()
    assert line, f"child exited early with {proc.poll()}"
    return line.strip()


def temporaries(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if is_temp_name(n))


def test_writer_killed_before_rename_leaves_the_old_file(tmp_path: Path,
                                                         children: list[subprocess.Popen[str]]
                                                         ) -> None:
    target = tmp_path / "nccl.conf"
    target.write_bytes(OLD)
    (tmp_path / "new.bin").write_bytes(NEW)
    proc = start(children, PAUSED_WRITER, str(target), str(tmp_path / "new.bin"))
    tmp = Path(read_line(proc))
    # The worst moment: the new content is complete on disk next to the target.
    assert tmp.parent == tmp_path and tmp.read_bytes() == NEW
    assert target.read_bytes() == OLD
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL

    assert target.read_bytes() == OLD
    assert (tmp_path / "nccl.conf.bak").read_bytes() == OLD
    # What can be left is a temporary that no reader of nccl.conf ever opens...
    assert temporaries(tmp_path) == [tmp.name]
    assert tmp.name != target.name and tmp.name.startswith(".nccl.conf")
    effective = load_effective({"NCCL_CONF_FILE": str(target)}, tmp_path, tmp_path / "etc")
    ifname = effective.get("NCCL_SOCKET_IFNAME")
    assert ifname is not None and (ifname.value, ifname.path) == ("eth0", str(target))
    # ...and the next write removes it because its writer is gone.
    write_atomic(target, b"NCCL_SOCKET_IFNAME==eth1\n")
    assert temporaries(tmp_path) == []
    assert target.read_bytes() == b"NCCL_SOCKET_IFNAME==eth1\n"


def test_writer_killed_at_random_moments_never_leaves_a_partial_file(
    tmp_path: Path, children: list[subprocess.Popen[str]]
) -> None:
    target = tmp_path / "nccl.conf"
    version_a = b"NCCL_SOCKET_IFNAME==eth1\n" + b"# a\n" * 100000
    version_b = b"NCCL_SOCKET_IFNAME==eth0\n" + b"# b\n" * 150000
    (tmp_path / "a.bin").write_bytes(version_a)
    (tmp_path / "b.bin").write_bytes(version_b)
    target.write_bytes(OLD)
    rng = random.Random(20240601)
    seen: set[bytes] = set()
    for _ in range(12):
        proc = start(children, LOOPING_WRITER, str(target), str(tmp_path / "a.bin"),
                     str(tmp_path / "b.bin"))
        assert read_line(proc) == "started"
        time.sleep(rng.uniform(0.01, 0.25))
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        content = target.read_bytes()
        assert content in (OLD, version_a, version_b), f"partial file of {len(content)} bytes"
        seen.add(content)
        # At most what the killed writer had open: its temporary and its backup's temporary.
        assert len(temporaries(tmp_path)) <= 2
    assert seen & {version_a, version_b}, "the writer never completed a write"
    write_atomic(target, OLD)
    assert temporaries(tmp_path) == []


# ------------------------------------------------------------------------ read-only locations


def _read_only_tmpfs_run(tmp_path: Path) -> tuple[int, dict[str, object], str, list[str]]:
    """In a private mount namespace: a tmpfs holding nccl.conf, remounted read-only, then the
    real `ddpkit nccl-conf set` against it. Returns (exit code, JSON doc, file after, listing)."""
    mount = tmp_path / "ro"
    mount.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    script = textwrap.dedent(f"""
        set -e
        mount -t tmpfs -o size=1m ddpkit-test "{mount}"
        printf '%s' "$OLD_CONTENT" > "{mount}/nccl.conf"
        mount -o remount,ro "{mount}"
        set +e
        "{sys.executable}" -m ddpkit nccl-conf set --file "{mount}/nccl.conf" \\
            NCCL_DEBUG=INFO --json > "{out}/doc.json" 2> "{out}/err.txt"
        echo $? > "{out}/rc.txt"
        cat "{mount}/nccl.conf" > "{out}/after.txt"
        ls -a "{mount}" > "{out}/ls.txt"
    """)
    env = child_env() | {"OLD_CONTENT": OLD.decode()}
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=120, env=env)
    if proc.returncode != 0 or not (out / "rc.txt").exists():
        pytest.skip(f"cannot build a read-only tmpfs here: {proc.stderr.strip()}")
    listing = (out / "ls.txt").read_text().split()
    doc = json.loads((out / "doc.json").read_text())
    return int((out / "rc.txt").read_text()), doc, (out / "after.txt").read_text(), listing


@pytest.mark.root
def test_read_only_filesystem_fails_with_permission_denied_and_keeps_the_file(
    tmp_path: Path,
) -> None:
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    code, doc, after, listing = _read_only_tmpfs_run(tmp_path)
    assert code == ExitCode.ENVIRONMENT
    error = doc["error"]
    assert isinstance(error, dict)
    assert error["id"] == "permission-denied"
    assert str(tmp_path / "ro" / "nccl.conf") in error["message"]
    assert "--user" in error["hint"]
    assert after == OLD.decode()
    assert sorted(listing) == [".", "..", "nccl.conf"]  # no temporary, no .bak
    # The mount lived only in the child's namespace.
    assert not os.path.ismount(tmp_path / "ro")


@pytest.mark.root
def test_immutable_directory_fails_with_permission_denied_and_keeps_the_file(
    run_cli, tmp_path: Path
) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("chattr (e2fsprogs) is not installed")
    directory = tmp_path / "etc"
    directory.mkdir()
    target = directory / "nccl.conf"
    target.write_bytes(OLD)
    lock = subprocess.run(["chattr", "+i", str(directory)], capture_output=True, text=True,
                          timeout=30)
    if lock.returncode != 0:
        pytest.skip(f"this filesystem has no immutable flag: {lock.stderr.strip()}")
    try:
        result = run_cli("nccl-conf", "set", "--file", str(target), "NCCL_DEBUG=INFO")
        listing = sorted(os.listdir(directory))
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=True, timeout=30)
    assert result.code == ExitCode.ENVIRONMENT
    assert "error [permission-denied]" in result.err
    assert str(target) in result.err and "--user" in result.err
    assert target.read_bytes() == OLD
    assert listing == ["nccl.conf"]


# ------------------------------------------------------------------ the real command, end to end


def ddpkit(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ddpkit", *argv], capture_output=True,
                          text=True, timeout=120, env=env)


def test_set_then_show_round_trip_through_the_real_command(tmp_path: Path) -> None:
    target = tmp_path / "job.conf"
    target.write_text("# written by hand\nNCCL_DEBUG=WARN\nnot a setting\n")
    env = child_env() | {"NCCL_CONF_FILE": str(target)}
    # `lo` exists on every Linux machine, so the interface check passes for real.
    done = ddpkit("nccl-conf", "set", "--file", str(target), "NCCL_SOCKET_IFNAME==lo",
                  "NCCL_DEBUG=INFO", "--json", env=env)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["written"] is True and doc["warnings"] == []
    assert target.read_text() == (
        "# written by hand\nNCCL_DEBUG=INFO\nnot a setting\nNCCL_SOCKET_IFNAME==lo\n")
    shown = ddpkit("nccl-conf", "show", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    settings = {s["name"]: s for s in json.loads(shown.stdout)["settings"]}
    assert (settings["NCCL_SOCKET_IFNAME"]["value"], settings["NCCL_SOCKET_IFNAME"]["path"]) == (
        "=lo", str(target))
    assert settings["NCCL_DEBUG"]["line"] == 2
    warnings = [w["id"] for w in json.loads(shown.stdout)["warnings"]]
    assert "conf-line-ignored" in warnings  # the hand-written junk line, still there
    assert "ifname-selects-trap" in warnings  # lo reaches no other machine


def test_nccl_conf_does_not_import_torch(tmp_path: Path) -> None:
    target = tmp_path / "job.conf"
    target.write_text("NCCL_DEBUG=WARN\n")
    probe = textwrap.dedent(f"""
        import io, sys
        from ddpkit.cli.output.console import Console
        from ddpkit.cli.main import main
        out = io.StringIO()
        assert main(["nccl-conf", "show", "--json"], Console(out=out, err=io.StringIO())) == 0
        assert main(["nccl-conf", "set", "--file", {str(target)!r}, "NCCL_DEBUG=INFO"],
                    Console(out=out, err=io.StringIO())) == 0
        print("torch" in sys.modules)
    """)
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, env=child_env() | {"NCCL_CONF_FILE": str(target)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
    assert target.read_text() == "NCCL_DEBUG=INFO\n"
