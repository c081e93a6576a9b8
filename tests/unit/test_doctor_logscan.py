"""The streaming scanner: prefixes, line numbers across chunks, long/binary/truncated input."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ddpkit.doctor.log import anchors
from ddpkit.doctor.log import scan as logscan
from ddpkit.doctor.log.anchor_words import ANCHORS
from ddpkit.doctor.log.diagnose import diagnose
from ddpkit.doctor.log.prefixes import parse_prefix
from ddpkit.doctor.log.scan import Event, raw_hits, scan

BOOT = b"gpu-a:2201:2201 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.4<0>"


def events(data: bytes, name: str = "x.log") -> list[Event]:
    """The line events of ``data`` (not the quiet tail's summary: tests/unit/test_doctor_quiet.py)."""
    return [e for e in scan(io.BytesIO(data), name) if e.kind != "log-read"]


def test_bootstrap_line_becomes_an_event_with_host_and_fields() -> None:
    (event,) = events(BOOT + b"\n")
    assert event.kind == "nccl-bootstrap"
    assert (event.file, event.line, event.host) == ("x.log", 1, "gpu-a")
    assert event.data["iface"] == "eth0" and event.data["addr"] == "172.17.0.4"
    assert event.text == BOOT.decode()


def test_lines_without_triggers_produce_nothing() -> None:
    noise = b"epoch 1 step 2 loss 0.5\n" * 1000 + b"NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P\n"
    assert events(noise) == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("gpu-a:1:2 [0] NCCL INFO x", ("gpu-a", None, None)),
        ("[rank3]: RuntimeError: boom", (None, None, 3)),
        ("[node1:0] gpu-b:1:2 [3] NCCL INFO x", ("gpu-b", "node1", None)),
        ("[default0]:gpu-c:1:2 [0] NCCL INFO x", ("gpu-c", None, None)),
        ("[1,5]<stderr>: RuntimeError: x", (None, None, 5)),
        ("[2024-05-16 10:49:23] h:1:2 [1] misc/socket.cc:544 NCCL WARN x", ("h", None, None)),
        ("[rank1]:[E1202 10:10:10.123456789 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog",
         (None, None, 1)),
        ("[E1202 09:50:58.043095373 socket.cpp:1028] [c10d] The client socket", (None, None, None)),
        ("E1202 09:50:30.151000 6205 api.py:1002] failed (exitcode: -9)", (None, None, None)),
        # Ray's driver, before each worker's and actor's output (the ip for another node's)
        ("(RayTrainWorker pid=3407, ip=10.0.0.2) RuntimeError: x", (None, "10.0.0.2", None)),
        ("(pid=3407) [rank1]: RuntimeError: x", (None, None, 1)),
        ("(LLMRayActor pid=347860) gpu-d:1:2 [0] NCCL WARN x", ("gpu-d", None, None)),
        ("(VllmWorkerProcess pid=8121) [rank1]: RuntimeError: x", (None, None, 1)),
        ("(see above) RuntimeError: x", (None, None, None)),
    ],
)
def test_prefixes(line: str, expected: tuple[str | None, str | None, int | None]) -> None:
    assert parse_prefix(line) == expected


def test_line_numbers_survive_chunk_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logscan, "CHUNK_BYTES", 64)
    lines = [f"filler line {i} with some words".encode() for i in range(200)]
    wanted = {7, 63, 64, 65, 150, 200}
    for number in wanted:
        lines[number - 1] = BOOT
    found = [e.line for e in events(b"\n".join(lines) + b"\n")]
    assert found == sorted(wanted)


def test_last_line_without_newline_is_read() -> None:
    (event,) = events(b"noise\n" * 3 + BOOT)
    assert event.line == 4


def test_crlf_and_ansi_colours_are_cleaned() -> None:
    line = b"\x1b[31mgpu-a:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\x1b[0m\r\n"
    (event,) = events(line)
    assert event.data["addr"] == "10.0.0.2"
    assert "\x1b" not in event.text and "\r" not in event.text


def test_non_utf8_and_binary_garbage_never_crash() -> None:
    garbage = bytes(range(256)) * 4000 + b"\xff\xfe\x00" + BOOT.replace(b"gpu-a", b"h\xe9") + b"\n"
    found = events(garbage)
    assert [e.kind for e in found] == ["nccl-bootstrap"]
    assert "\ufffd" in (found[0].host or "") or "\ufffd" in found[0].text


def test_a_huge_line_is_windowed_not_held_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logscan, "CHUNK_BYTES", 4096)
    filler = b"x" * 300_000
    data = (filler + b" RuntimeError: Address already in use " + filler
            + b" DistNetworkError: port: 29500 address already in use " + filler)
    reads: list[int] = []

    class Spy(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            chunk = super().read(size)
            reads.append(len(chunk))
            return chunk

    hits = list(raw_hits(Spy(data)))
    assert max(reads) <= 4096
    assert all(len(raw) <= logscan.LINE_WINDOW for _, raw, _, _, _ in hits)
    kinds = [e.kind for e in scan(io.BytesIO(data), "big")]
    assert kinds.count("port-in-use") >= 2


def test_follow_lines_read_torchrun_summary() -> None:
    data = (
        b"Root Cause (first observed failure):\n[0]:\n  time      : 2024-12-02_11:00:01\n"
        b"  host      : gpu-7\n  rank      : 3 (local_rank: 3)\n  exitcode  : -9 (pid: 505)\n"
    )
    kinds = [(e.kind, e.line) for e in events(data)]
    assert kinds == [("summary-root", 1), ("summary-host", 4), ("summary-rank", 5),
                     ("summary-exit", 6)]


def test_flattened_line_yields_events_in_order() -> None:
    data = (b"Root Cause (first observed failure): [0]: host : n3 rank : 5 (local_rank: 1) "
            b"exitcode : -11 (pid: 42) traceback : Signal 11 (SIGSEGV) received by PID 42\n")
    assert [e.kind for e in events(data)] == [
        "summary-root", "summary-host", "summary-rank", "summary-exit", "summary-signal"]


def test_unprefixed_lines_inherit_the_files_only_host() -> None:
    data = BOOT + b"\nLast error:\nsocketPollConnect: connect to 172.17.0.4<1> returned " \
                  b"Connection refused, exceeded error retry count\n"
    connect = [e for e in events(data) if e.kind == "connect-error"]
    assert connect and all(e.host == "gpu-a" for e in connect)


def test_ib_warning_is_not_read_as_a_firewall_timeout() -> None:
    line = b"h:1:2 [0] misc/ibvwrap.cc:1 NCCL WARN Call to ibv_modify_qp failed with error " \
           b"Connection timed out\n"
    assert [e.kind for e in events(line)] == ["ib-error"]


@pytest.mark.parametrize(
    ("line", "where", "detail"),
    [
        (b"Test NCCL failure common.cu:777 'unhandled cuda error'", "common.cu:777",
         "unhandled cuda error"),
        (b"node2: Test NCCL failure common.cu:959 'internal error - please report this issue to "
         b"the NCCL developers / '", "common.cu:959",
         "internal error - please report this issue to the NCCL developers"),
        (b"n: Test NCCL failure common.cu:1 'unhandled system error (run with NCCL_DEBUG=INFO for "
         b"details) / socket failed'", "common.cu:1", "unhandled system error"),
    ],
)
def test_nccl_tests_failure_line_is_an_nccl_error(line: bytes, where: str, detail: str) -> None:
    (event,) = events(line + b"\n")
    assert event.kind == "nccl-error"
    assert (event.data["where"], event.data["detail"]) == (where, detail)


@pytest.mark.parametrize("line", [
    b"Test CUDA failure common.cu:732 'invalid device ordinal'",  # CUDA's, not NCCL's
    b"#  Out of bounds values : 0 OK",
    b"an NCCL failure was reported upstream",
])
def test_other_failure_wording_is_no_nccl_error(line: bytes) -> None:
    assert "nccl-error" not in [e.kind for e in events(line + b"\n")]


def test_a_pattern_that_opens_with_a_run_of_any_characters_starts_at_a_line_start() -> None:
    # "[^\n]*" first, searched from every position of a long line, is quadratic in the line's
    # length (an 8 KB line of one character after a trigger word took seconds a pattern, a
    # 1.6 MB log of them minutes); from a line's start it reads the line once, and finds the same
    from ddpkit.doctor.log.end_lines import END_PATTERNS
    from ddpkit.doctor.log.patterns import PATTERNS
    for pattern in (*PATTERNS, *END_PATTERNS):
        for regex in (pattern.regex, *pattern.extras):
            text = regex.pattern
            assert not text.startswith(("(?P<detail>[^\n]*", "[^\n]*")), text[:80]


def test_every_trigger_matches_an_anchor() -> None:
    # The scanner only looks at lines with an anchor: a trigger without one would never be seen.
    for trigger in anchors.TRIGGERS:
        assert any(a.search(trigger) for a in anchors.ANCHOR_RES), trigger


def test_triggers_in_finds_overlapping_triggers() -> None:
    assert {b"Error: ", b"rror"} <= anchors.triggers_in(b"RuntimeError: x")
    assert anchors.triggers_in(b"epoch 1 loss 0.3") == frozenset()


def test_anchors_have_literal_prefixes() -> None:
    # The key is what the automaton finds; a short key would stop the scan on most lines.
    for anchor in ANCHORS:
        assert len(anchors.literal_prefix(anchor)) >= 4, anchor


@pytest.mark.parametrize(
    "dressing",
    [
        (b"\x1b]0;my title\x07", b""),  # OSC window title, BEL-terminated
        (b"\x1b]8;;http://127.0.0.1/x\x1b\\", b"\x1b]8;;\x1b\\"),  # OSC 8 hyperlink, ST-terminated
        (b"\x1b[1;31m\x1b[2K", b"\x1b[0m\x07"),  # CSI colour, erase line, a bell
        (b"\xc2\x9b31m", b"\x08\x08"),  # a C1 CSI (UTF-8 encoded) and backspaces
        (b"\x1b(B\x0e", b"\x0f\x7f"),  # charset switch, shift out/in, DEL
    ],
)
def test_terminal_control_sequences_never_reach_the_evidence(dressing: tuple[bytes, bytes]) -> None:
    before, after = dressing
    (event,) = events(before + BOOT + after + b"\n")
    assert event.text == BOOT.decode() and event.data["iface"] == "eth0"
    assert event.text.isprintable()


def test_tabs_stay_in_the_evidence() -> None:
    (event,) = events(BOOT + b"\tafter a tab\n")
    assert event.text.endswith("\tafter a tab")


RETRY = b"gpu-b:3107:3140 [0] NCCL INFO Call to connect returned Connection refused, retrying\n"


def test_a_run_of_identical_lines_is_one_event_counting_them_all() -> None:
    data = b"noise\n" + RETRY * 1000 + BOOT + b"\n" + RETRY * 3
    found = events(data)
    assert [(e.kind, e.line, e.repeat) for e in found] == [
        ("connect-error", 2, 1000), ("nccl-bootstrap", 1002, 1), ("connect-error", 1003, 3)]


def test_runs_split_by_chunks_still_count_every_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logscan, "CHUNK_BYTES", 1000)
    data = RETRY * 777 + BOOT + b"\n"
    found = events(data)
    assert sum(e.repeat for e in found if e.kind == "connect-error") == 777
    assert found[-1].kind == "nccl-bootstrap" and found[-1].line == 778


def test_a_line_differing_by_one_byte_breaks_the_run() -> None:
    other = RETRY.replace(b"3140", b"3141")
    found = events(RETRY * 5 + other + RETRY * 2)
    assert [(e.line, e.repeat) for e in found] == [(1, 5), (6, 1), (7, 2)]


def test_follow_lines_are_never_folded_into_a_run() -> None:
    head = b"Root Cause (first observed failure):\n"
    data = head + head + b"[0]:\n  host      : gpu-7\n"
    found = [(e.kind, e.line, e.repeat) for e in events(data)]
    assert ("summary-root", 1, 1) in found and all(r == 1 for _, _, r in found)


@pytest.mark.parametrize(
    ("line", "kind", "field", "value"),
    [
        (b"gpu2:46654:46654 [0] NCCL INFO Using internal Network Socket", "nccl-network", "name",
         "Socket"),
        (b"modal:2:774 [0] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/"
         b"libnccl-net.so", "nccl-plugin", "detail",
         "Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so"),
        (b"PyTorch version: 2.5.1+cu124", "torch-version", "version", "2.5.1+cu124"),
        (b"[pip3] torch==2.4.0", "torch-version", "version", "2.4.0"),
    ],
)
def test_what_a_node_runs_with_is_read(line: bytes, kind: str, field: str, value: str) -> None:
    (event,) = [e for e in events(line + b"\n") if e.kind == kind]
    assert event.data[field] == value


def test_other_torch_packages_are_not_the_torch_build() -> None:
    lines = b"[pip3] torchaudio==2.4.0\n[pip3] torchvision==0.19.0\n[conda] pytorch 2.4.0 py3\n"
    assert [e for e in events(lines) if e.kind == "torch-version"] == []


def test_a_followed_line_that_asks_for_lines_of_its_own_gets_them() -> None:
    # "Root Cause" read as one of "ChildFailedError"'s lines still reads its own record after it
    data = (b"torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
            b"train.py FAILED\nRoot Cause (first observed failure):\n[0]:\n"
            b"  time      : 2023-04-14_06:35:35\n  host      : node1\n"
            b"  rank      : 0 (local_rank: 0)\n  exitcode  : -7 (pid: 3111)\n"
            b"  error_file: <N/A>\n  traceback : Signal 7 (SIGBUS) received by PID 3111\n")
    kinds = [e.kind for e in events(data)]
    assert "summary-exit" in kinds or "summary-signal" in kinds, kinds


def test_alternating_processes_fold_into_one_event_per_line_with_the_true_counts() -> None:
    # 8 processes' retries alternating line by line (a merged console), then a break in the
    # cycle, then 3 processes alternating: every line is counted as often as it occurs
    lines = [f"gpu-b:{3107 + r}:{3140 + r} [{r}] NCCL INFO Call to connect returned Connection "
             f"refused, retrying" for r in range(8)]
    text = lines * 500 + ["epoch 1 loss 0.5", lines[0]] + lines[:3] * 40
    data = ("\n".join(text) + "\n").encode()
    events = [e for e in scan(io.BytesIO(data), "x") if e.kind == "connect-error"]
    counts: dict[str, int] = {}
    for event in events:
        counts[event.text] = counts.get(event.text, 0) + event.repeat
    expected = {line: text.count(line) for line in lines}
    assert counts == expected
    assert len(events) < 40  # folded: not one event per line
    first = {e.text: e.line for e in reversed(events)}
    assert first[lines[3]] == 4  # numbered by the first copy


def test_time_stamped_copies_of_a_message_keep_their_own_text_and_origin() -> None:
    # the line cache is asked without glog's time stamp and pid; each event keeps its line
    lines = [f"[rank{r}]:[W1204 09:50:{10 + r:02d}.{r:06d} {3100 + r} socket.cpp:663] [c10d] The "
             "client socket has failed to connect to [node-0]:29500 (errno: 111 - Connection "
             "refused)." for r in range(3)]
    events = [e for e in scan(io.BytesIO(("\n".join(lines) + "\n").encode()), "x")
              if e.kind == "connect-error"]
    assert [e.text for e in events] == lines
    assert [e.rank for e in events] == [0, 1, 2]


def test_a_run_of_one_message_differing_only_in_glog_stamp_and_pid_is_one_event() -> None:
    # c10d's retries from 8 processes, each line with glog's own time stamp and pid (nothing
    # alike byte for byte): one event counts them; another message, a rank tag or the end of
    # the run breaks it, and the lines after it keep their numbers
    def retry(i: int, tail: str = "(errno: 111 - Connection refused).") -> str:
        return (f"[W1204 09:50:{i // 1000 % 60:02d}.{i:06d} {3107 + i % 8} socket.cpp:663] [c10d] "
                f"The client socket has failed to connect to [node-0]:29500 {tail}")
    text = ([retry(i) for i in range(300)] + [retry(300, "(errno: 110 - Connection timed out).")]
            + [retry(i) for i in range(301, 304)] + ["[rank2]:" + retry(304)]
            + ["Traceback (most recent call last):", "RuntimeError: boom"])
    found = [e for e in scan(io.BytesIO(("\n".join(text) + "\n").encode()), "x")
             if e.kind == "connect-error"]
    assert [(e.line, e.repeat) for e in found] == [(1, 300), (301, 1), (302, 3), (305, 1)]
    assert found[0].text == text[0] and found[3].rank == 2
    assert sum(e.repeat for e in found) == 305


@pytest.mark.parametrize("prefix", ["(TrainerActor pid=348952) ",
                                    # vLLM's, in color on a terminal (CYAN ... RESET)
                                    "\x1b[1;36m(VllmWorkerProcess pid=812)\x1b[0;0m "])
def test_an_exception_after_rays_or_vllms_prefix_is_a_failure(tmp_path: Path,
                                                              prefix: str) -> None:
    # Ray prints an actor's output after "(ActorClass pid=N)" (and its repeats' count after it)
    log = tmp_path / "driver.log"
    log.write_text(f"{prefix}  File \"/opt/app/train.py\", line 75, in step\n"
                   f"{prefix}    loss.backward()\n"
                   f"{prefix}RuntimeError: element 0 of tensors does not "
                   "require grad [repeated 3x across cluster]\n")
    (top, *_) = diagnose([str(log)])
    assert top.severity == "error" and top.id != "no-failure"
