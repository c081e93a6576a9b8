"""The anchors' one-pass search (doctor/log/anchors.py) against the regexes it stands for: it
must find exactly the first match at or after each position that a regex search would find,
across its search windows' edges and for anchors that are regexes."""

from __future__ import annotations

import random
import re

import pytest

from ddpkit.doctor.log import anchors
from ddpkit.doctor.log.anchor_words import ANCHORS

_EVERY_ANCHOR = re.compile(b"|".join(b"(?:" + a + b")" for a in ANCHORS))


def _expected(buf: bytes, pos: int, limit: int) -> int:
    match = _EVERY_ANCHOR.search(buf, pos, limit)
    return -1 if match is None else match.start()


@pytest.mark.parametrize(("anchor", "key"), [
    (b"rror", b"rror"),
    (rb"_device\(", b"_device"),
    (rb"failed to (?:listen|bind)", b"failed to "),
    (rb"local_rank(?:=|': )-1", b"local_rank"),
    (rb"colou?r", b"colo"),  # the character a quantifier may leave out is not part of the key
    (rb"abc*d", b"ab"),
    (rb"ab{2}", b"a"),
    (rb"ab+c", b"ab"),
    (rb"ab[|]c", b"ab"),  # a bar inside a class is no alternation
])
def test_literal_prefix(anchor: bytes, key: bytes) -> None:
    assert anchors.literal_prefix(anchor) == key


@pytest.mark.parametrize("anchor", [rb"abc|def", rb"(?:x)abc", rb"\d+ ranks", b"a?b"])
def test_literal_prefix_refuses_an_anchor_without_one(anchor: bytes) -> None:
    with pytest.raises(ValueError, match="anchor"):
        anchors.literal_prefix(anchor)


def _walk(buf: bytes, limit: int, rng: random.Random) -> list[tuple[int, int]]:
    """(position, hit) pairs of a scan-like walk: positions that only grow, sometimes jumping."""
    hits = anchors.AnchorHits(buf, limit)
    seen, pos = [], 0
    while pos <= limit:
        hit = hits.next_from(pos)
        seen.append((pos, hit))
        if hit < 0:
            break
        pos = hit + 1 + (rng.randrange(3 * anchors.SEARCH_WINDOW) if rng.random() < 0.001 else 0)
    return seen


def _words() -> list[bytes]:
    words = [b"epoch", b"loss", b"\n", b" ", b"NCCL", b"NCCL INFO", b"NCCL WARN", b"NCCL (",
             b"_device", b"_device(", b"local_rank=-1", b"local_rank=0", b"failed to bind",
             b"failed to ", b"rro", b"rror", b"Error", b"onnec", b"onnect", b'File "']
    return words + [anchors.literal_prefix(a) for a in ANCHORS] + list(ANCHORS[1:6])


@pytest.mark.parametrize("seed", range(6))
def test_every_hit_is_the_first_match_a_regex_search_finds(seed: int) -> None:
    rng, words = random.Random(seed), _words()
    buf = b"".join(rng.choice(words) + rng.choice([b"", b" ", b"\n"]) for _ in range(60_000))
    limit = len(buf) - rng.randrange(64)
    walk = _walk(buf, limit, rng)
    assert len(walk) > 1000
    for pos, hit in walk:
        assert hit == _expected(buf, pos, limit), (pos, hit)


def test_a_key_across_a_windows_edge_is_found_once() -> None:
    edge = anchors.SEARCH_WINDOW
    for shift in range(1, 6):
        buf = b"x" * (edge - shift) + b"onnect refused\n" + b"y" * 100
        hits = anchors.AnchorHits(buf, len(buf))
        assert hits.next_from(0) == edge - shift
        assert hits.next_from(edge - shift + 1) == -1


def test_a_regex_anchor_is_tried_only_where_its_key_stands() -> None:
    buf = b"torch.cuda.set_device -1\nlocal_rank=5\nset_device(3)\nlocal_rank': -1\n"
    hits = anchors.AnchorHits(buf, len(buf))
    first = hits.next_from(0)
    assert buf[first:].startswith(b"_device(")
    assert buf[hits.next_from(first + 1):].startswith(b"local_rank': -1")


def test_the_limit_is_respected() -> None:
    buf = b"fine\n" * 10 + b"RuntimeError: boom\n"
    hits = anchors.AnchorHits(buf, 50)
    assert hits.next_from(0) == -1
