"""The raw TCP baseline: schedule, aggregation, wire format, and a real measurement on loopback."""

from __future__ import annotations

import itertools
import socket
import time

import pytest

from ddpkit.bench import tcp


@pytest.mark.parametrize("nodes", [2, 3, 4, 5, 8])
def test_every_ordered_pair_once_and_no_node_twice_in_a_round(nodes: int) -> None:
    rounds = tcp.pair_rounds(nodes)
    pairs = [pair for r in rounds for pair in r]
    assert sorted(pairs) == sorted(itertools.permutations(range(nodes), 2))
    for r in rounds:
        members = [n for pair in r for n in pair]
        assert len(members) == len(set(members))
    assert len(rounds) == 2 * (nodes - 1 + nodes % 2)


def test_one_node_has_no_pairs() -> None:
    assert tcp.pair_rounds(1) == []


def test_rate_is_bytes_over_the_receivers_span_across_streams() -> None:
    reports = [tcp.StreamReport(100_000_000, 1_000_000_000, 2_000_000_000),
               tcp.StreamReport(50_000_000, 1_500_000_000, 2_500_000_000)]
    m = tcp.aggregate(2, reports)
    assert m.nbytes == 150_000_000 and m.seconds == pytest.approx(1.5)
    assert m.bytes_per_s == pytest.approx(100e6) and m.error is None


def test_nothing_received_is_an_error_not_a_rate() -> None:
    assert tcp.aggregate(1, [tcp.StreamReport(0, 0, 0)]).bytes_per_s is None
    assert tcp.aggregate(1, [tcp.StreamReport(10, 5, 5)]).error == "too little data to time"


def test_header_and_reply_round_trip_and_strangers_are_refused() -> None:
    header = tcp.pack_header(4, b"12345678")
    assert tcp.unpack_header(header) == (4, b"12345678")
    with pytest.raises(ValueError):
        tcp.unpack_header(b"GET / HTTP/1.1\r\n")
    report = tcp.StreamReport(7, 8, 9)
    assert tcp.unpack_reply(tcp.pack_reply(report)) == report


@pytest.mark.parametrize("streams", [1, 3])
def test_measure_on_loopback_is_bounded_by_bytes_and_counts_what_arrived(streams: int) -> None:
    with tcp.Receiver("127.0.0.1") as receiver:
        started = time.monotonic()
        m = tcp.measure("127.0.0.1", receiver.port, streams=streams, seconds=5.0,
                        max_bytes=24 << 20, source="127.0.0.1")
        elapsed = time.monotonic() - started
    assert m.error is None, m.error
    per_stream = (24 << 20) // streams
    assert m.nbytes == per_stream * streams  # the byte budget, split over the streams
    assert m.bytes_per_s is not None and m.bytes_per_s > 10e6
    assert elapsed < 5.0  # stopped by the byte budget, not the clock


def test_measure_stops_at_the_time_limit() -> None:
    with tcp.Receiver("127.0.0.1") as receiver:
        started = time.monotonic()
        m = tcp.measure("127.0.0.1", receiver.port, seconds=0.3, max_bytes=1 << 40)
        elapsed = time.monotonic() - started
    assert m.error is None and m.nbytes > 0
    assert 0.25 < elapsed < 3.0


def test_nobody_listening_is_reported_not_raised() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        m = tcp.measure("127.0.0.1", port, seconds=0.2, connect_timeout=2.0)
    assert m.bytes_per_s is None and m.error is not None and "cannot connect" in m.error


def test_receiver_threads_end_when_closed() -> None:
    receiver = tcp.Receiver("127.0.0.1").start()
    tcp.measure("127.0.0.1", receiver.port, seconds=0.1, max_bytes=1 << 20)
    receiver.close()
    assert not receiver._acceptor.is_alive()
    assert all(not t.is_alive() for t in receiver._threads)
