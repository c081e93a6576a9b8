"""``ddpkit sim up --no-private-network``: the spec, its plan and its record (no root needed)."""

from __future__ import annotations

import pytest

from ddpkit.errors import ConfigError
from ddpkit.sim.spec import SimSpec
from ddpkit.sim.topology import build_cluster, plan_up


def test_plan_builds_only_the_shared_eth0() -> None:
    spec = SimSpec(nodes=2, name="np", private_network=False)
    words = [" ".join(step.argv) for step in plan_up(spec) if step.argv]
    assert not any("bridge" in w or "np-br" in w or "eth1" in w or "nph0b" in w for w in words)
    assert sum("addr add 172.17.0.4/16 dev eth0" in w for w in words) == 2
    with_private = [" ".join(s.argv) for s in plan_up(SimSpec(nodes=2, name="np")) if s.argv]
    assert any("eth1" in w for w in with_private) and any("np-br" in w for w in with_private)


def test_nodes_record_no_private_nic_and_the_spec_round_trips() -> None:
    spec = SimSpec(nodes=2, name="np", private_network=False)
    node = build_cluster(spec).to_dict()["nodes"][1]
    assert (node["private_ifname"], node["private_address"]) == (None, None)
    assert node["public_address"] == "172.17.0.4"
    assert spec.to_dict()["private_network"] is False
    assert SimSpec.from_dict(spec.to_dict()) == spec
    old = {k: v for k, v in SimSpec(nodes=2).to_dict().items() if k != "private_network"}
    assert SimSpec.from_dict(old).private_network  # a state file written before the option


@pytest.mark.parametrize("extra", [{"rate": "1gbit"}, {"delay": "5ms"}, {"ifnames": {1: "ens5"}}])
def test_private_nic_options_are_refused(extra: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as caught:
        SimSpec(nodes=2, private_network=False, **extra)  # type: ignore[arg-type]
    assert caught.value.error_id == "sim-no-private-network-conflict"
