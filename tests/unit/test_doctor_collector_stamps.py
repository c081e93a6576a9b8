"""A log collector's time stamp before every line changes no reading: `kubectl logs --timestamps`
and `docker logs --timestamps` put RFC 3339 with nanoseconds before each line
("2024-10-11T20:10:11.640908017Z ", Kubernetes' kubelet and Docker's log drivers), the container
runtime's files (the CRI logging format) the same with the stream and F/P after it, and a
PyTorchJob's logs are often read so. Lines made from the printing programs' formats: Python's
warnings (warnings.formatwarning, the source line indented below), c10's warning-level glog
header ("[W1204 09:50:12.118000 3107 socket.cpp:663] [c10d] ..."), CPython's exception line
without a message (format_exception_only), Lightning's process-group init
(_init_dist_connection), c10d's error-level connect failure."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from cause_logs import tops

from ddpkit.doctor.log.prefixes import log_line
from ddpkit.doctor.log.scan import scan

WARNED = ("/x/site-packages/torch/distributed/distributed_c10d.py:4631: UserWarning: No device id "
          "is provided via `init_process_group` or `barrier `. Using the current device set by "
          "the user.")
LOGS = [
    ["step 10 loss 0.31", WARNED, "  warnings.warn(  # warn only once"],
    ["Traceback (most recent call last):", '  File "train.py", line 12, in <module>',
     "    assert flash_attn_available", "AssertionError"],
    ["[W1204 09:50:12.118000 3107 socket.cpp:663] [c10d] The IPv6 network addresses of "
     "(node-0, 29500) cannot be retrieved (gai error: -3 - Temporary failure in name resolution)."],
    ["GPU available: True, used: True",
     "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2"],
    ["[E1204 09:50:12.118000 3107 socket.cpp:860] [c10d] The client socket has failed to connect "
     "to [10.0.0.1]:29500 (errno: 111 - Connection refused)."] * 3,
]


@pytest.mark.parametrize("stamp", ["2024-10-11T20:10:11.640908017Z ",
                                   "2024-10-11T20:10:11Z ", "2024-10-11T20:10:11.640+08:00 ",
                                   "2024-10-11T20:10:11.640908017Z stderr F "])
@pytest.mark.parametrize("lines", LOGS)
def test_a_collectors_stamp_changes_no_reading(tmp_path: Path, stamp: str,
                                               lines: list[str]) -> None:
    want, got = tops(tmp_path, lines, lambda line: stamp + line)
    assert (got.id, got.severity) == (want.id, want.severity)


@pytest.mark.parametrize(("raw", "text"), [
    (b"2024-10-11T20:10:11.640908017Z [rank0]: x", "[rank0]: x"),
    (b"2024-10-11T20:10:11.640908017+00:00 stdout F [rank0]: x", "[rank0]: x"),  # CRI's
    # a program's own stamps stay: logging's asctime, and a stamp without the space after it
    (b"2024-10-11 20:10:11,640 INFO x", "2024-10-11 20:10:11,640 INFO x"),
    (b"2024-10-11T20:10:11Z", "2024-10-11T20:10:11Z"),
])
def test_only_the_collectors_form_is_taken_off(raw: bytes, text: str) -> None:
    assert log_line(raw) == text


def test_a_stamped_retry_loop_folds_like_a_plain_one() -> None:
    # c10d's retries, each line stamped by the collector at another moment: read past, the copies
    # fold into one event as the plain loop's do (the scan stays fast on a loop of any length)
    line = LOGS[-1][0]
    plain = "".join(f"{line}\n" for _ in range(5000)).encode()
    stamped = "".join(f"2024-10-11T20:10:{n % 60:02d}.{n:09d}Z {line}\n"
                      for n in range(5000)).encode()
    want = [(e.kind, e.line, e.repeat) for e in scan(io.BytesIO(plain), "plain.log")]
    got = [(e.kind, e.line, e.repeat) for e in scan(io.BytesIO(stamped), "stamped.log")]
    assert got == want and len(got) < 10
