"""``doctor --log`` refuses the kernel's own files (issue 32): as root, ``/proc/kmsg`` is a
"regular" file of size 0 whose read waits for the kernel's next message, for ever, and takes the
messages away from the system log. The refusal comes at once, with the way out."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddpkit.doctor.log.diagnose import check_readable
from ddpkit.errors import ConfigError


@pytest.mark.parametrize("path", ["/proc/kmsg", "/proc/self/status", "/sys/kernel/uevent_seqnum"])
def test_a_kernel_file_is_refused(path: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} is not on this machine")
    with pytest.raises(ConfigError) as caught:
        check_readable(path)
    assert caught.value.error_id == "log-unreadable"
    assert "kernel" in caught.value.message and "dmesg > kernel.log" in caught.value.hint


def test_a_link_to_a_kernel_file_is_refused_too(tmp_path: Path) -> None:
    link = tmp_path / "innocent.log"
    link.symlink_to("/proc/self/status")
    with pytest.raises(ConfigError):
        check_readable(str(link))


@pytest.mark.timeout(60)
def test_doctor_log_on_proc_kmsg_ends_at_once() -> None:
    if not os.path.exists("/proc/kmsg"):
        pytest.skip("no /proc/kmsg here")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "ddpkit", "doctor", "--log", "/proc/kmsg"],
                          capture_output=True, text=True, timeout=50)
    assert time.monotonic() - started < 30
    assert done.returncode == 3 and "log-unreadable" in done.stderr, done.stderr
