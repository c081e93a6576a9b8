"""The one reader of JSON values from a store anyone can write to (issue 22): whatever the bytes,
a dict or NotOurs, fast, and never another exception."""

from __future__ import annotations

import threading
import time

import pytest

from ddpkit.launch.store_client import CallTimedOut, within
from ddpkit.launch.store_value import MAX_DEPTH, NotOurs, nesting_within, parse_json_dict, text_field


def test_a_real_value_parses() -> None:
    raw = b'{"host": "node1", "stack_reports": [{"stacks": [{"frames": [["f", 1]]}]}], "s": "[[["}'
    assert parse_json_dict(raw)["host"] == "node1"


@pytest.mark.parametrize("raw", [
    b"[" * 200_000,  # RecursionError in json.loads before issue 22
    b"{" * 200_000,
    b'{"a":' * 5_000 + b"1" + b"}" * 5_000,  # balanced, deep
    b"[]" * 400_000,  # long but flat: a list, not an object
    b'{"n": ' + b"9" * 100_000 + b"}",  # an integer beyond Python's digit limit
    b'{"n": NaN}', b'{"n": Infinity}',
    b"\xff\xfe{}", b"", b"null", b'"text"', b"[1, 2]", b'{"a": 1', b"x" * ((1 << 20) + 1),
])
def test_anything_else_is_not_ours_and_nothing_else_escapes(raw: bytes) -> None:
    started = time.monotonic()
    with pytest.raises(NotOurs):
        parse_json_dict(raw)
    assert time.monotonic() - started < 5  # 2 loaded cores: generous; typically milliseconds


@pytest.mark.parametrize("raw", [None, 5, "text", {"a": 1}])
def test_a_value_that_is_not_bytes_is_not_ours(raw: object) -> None:
    with pytest.raises(NotOurs):
        parse_json_dict(raw)


def test_the_depth_check_never_undercounts() -> None:
    for depth in range(1, 3 * MAX_DEPTH):
        raw = b'{"a":' * depth + b"1" + b"}" * depth
        assert nesting_within(raw, MAX_DEPTH) == (depth <= MAX_DEPTH)
        mixed = b"[{" * depth + b"}]" * depth  # 2 * depth levels, removed 2 per round at most
        if 2 * depth <= MAX_DEPTH:
            assert nesting_within(mixed, MAX_DEPTH)
        if depth > MAX_DEPTH:  # never lets through more than twice the bound
            assert not nesting_within(mixed, MAX_DEPTH)
    assert nesting_within(b'{"s": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\"["}', 2)


def test_text_fields_are_strings_or_the_default() -> None:
    value = {"host": ["not", "a", "string"], "name": "x" * 1000}
    assert text_field(value, "host", "?") == "?"
    assert text_field(value, "name", most=10) == "x" * 10
    assert text_field(value, "missing") == ""


def test_a_call_past_its_deadline_raises_and_a_failing_call_raises_its_error() -> None:
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(CallTimedOut):
        within(lambda: release.wait(30), 0.5)
    assert time.monotonic() - started < 3
    release.set()
    assert within(lambda: 7, 5) == 7
    with pytest.raises(RuntimeError, match="gone"):
        within(lambda: (_ for _ in ()).throw(RuntimeError("gone")), 5)


@pytest.mark.timeout(60)
def test_a_served_store_listens_on_its_address_only(tcp_port: int) -> None:
    """The join store and the cluster doctor's store both start through serve()."""
    import socket

    pytest.importorskip("torch")
    from ddpkit.launch.store_client import serve

    store = serve("127.0.0.1", tcp_port, 10)
    try:
        socket.create_connection(("127.0.0.1", tcp_port), timeout=5).close()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.2", tcp_port), timeout=5).close()
    finally:
        del store
