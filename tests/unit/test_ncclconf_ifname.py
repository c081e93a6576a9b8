"""NCCL_SOCKET_IFNAME parsing and matching, following NCCL's findInterfaces/parseStringList."""

from __future__ import annotations

import random

import pytest

from ddpkit.ncclconf.ifname import (
    IfnameSpec,
    exact_spec,
    matching_interfaces,
    overmatched,
    padded_tokens,
    parse_ifname,
)

NAMES = ("lo", "eth0", "eth1", "eth10", "eth1.100", "docker0", "docker1", "veth3a2f", "ib0", "ens5")


@pytest.mark.parametrize(
    ("value", "spec"),
    [
        ("eth", IfnameSpec(False, False, ("eth",))),
        ("=eth1", IfnameSpec(False, True, ("eth1",))),
        ("^docker,lo", IfnameSpec(True, False, ("docker", "lo"))),
        ("^=docker0", IfnameSpec(True, True, ("docker0",))),
        ("=eth0,eth1", IfnameSpec(False, True, ("eth0", "eth1"))),
        ("eth0,,eth1,", IfnameSpec(False, False, ("eth0", "eth1"))),
        ("mlx5_0:1,mlx5_1:1", IfnameSpec(False, False, ("mlx5_0", "mlx5_1"))),
        ("=^docker0", IfnameSpec(False, True, ("^docker0",))),  # '=' first: '^' is literal
        ("eth0, eth1", IfnameSpec(False, False, ("eth0", " eth1"))),  # NCCL does not trim
    ],
)
def test_parse(value: str, spec: IfnameSpec) -> None:
    assert parse_ifname(value) == spec


@pytest.mark.parametrize("value", ["", "e", "^", "="])
def test_one_character_or_empty_is_ignored(value: str) -> None:
    assert parse_ifname(value) is None
    assert matching_interfaces(value, NAMES) == ()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("eth1", ("eth1", "eth1.100", "eth10")),  # prefix: the trap the '=' form avoids
        ("=eth1", ("eth1",)),
        ("eth", ("eth0", "eth1", "eth1.100", "eth10")),
        ("^docker,lo", ("eth0", "eth1", "eth1.100", "eth10", "ens5", "ib0", "veth3a2f")),
        ("^=docker0", ("docker1", "eth0", "eth1", "eth1.100", "eth10", "ens5", "ib0", "lo",
                       "veth3a2f")),
        ("=eth0,ib0", ("eth0", "ib0")),
        ("eth0, eth1", ("eth0",)),
        ("wlan", ()),
        ("=eth", ()),
    ],
)
def test_matching(value: str, expected: tuple[str, ...]) -> None:
    assert matching_interfaces(value, NAMES) == tuple(sorted(expected))


def test_matching_is_sorted_and_independent_of_input_order() -> None:
    shuffled = list(NAMES) * 2  # duplicates too
    random.Random(7).shuffle(shuffled)
    assert matching_interfaces("^lo", shuffled) == tuple(sorted(set(NAMES) - {"lo"}))


def test_to_text_round_trips() -> None:
    for value in ("=eth1", "^docker,lo", "^=docker0", "eth"):
        spec = parse_ifname(value)
        assert spec is not None and spec.to_text() == value


def test_overmatched_finds_exact_names_used_as_prefixes() -> None:
    assert overmatched("eth1", NAMES) == (("eth1", ("eth1.100", "eth10")),)
    assert overmatched("eth0,eth1", NAMES) == (("eth1", ("eth1.100", "eth10")),)
    assert overmatched("=eth1", NAMES) == ()
    assert overmatched("^eth1", NAMES) == ()
    assert overmatched("eth", NAMES) == ()  # not an interface name itself
    assert overmatched("eth1", ("eth1", "eth2")) == ()


def test_padded_tokens() -> None:
    assert padded_tokens("eth0, eth1") == (" eth1",)
    assert padded_tokens("=eth0") == ()


def test_exact_spec() -> None:
    assert exact_spec("eth1") == "=eth1"
    assert matching_interfaces(exact_spec("eth1"), NAMES) == ("eth1",)
