"""Cluster doctor: the side-by-side fingerprint diff and how much each difference weighs."""

from __future__ import annotations

from dataclasses import replace

from ddpkit.doctor.cluster.fingerprint import describe_groups, diff
from ddpkit.doctor.cluster.model import Fingerprint

BASE = Fingerprint("node0", "3.11.7", "2.13.0", "12.4", "2.21.5", "550.54", 8, "0.1.0")


def nodes(*changes: dict[str, object]) -> dict[int, Fingerprint]:
    return {rank: replace(BASE, hostname=f"node{rank}", **change)  # type: ignore[arg-type]
            for rank, change in enumerate(changes)}


def test_alike_nodes_have_no_differences() -> None:
    assert diff(nodes({}, {}, {})) == ()


def test_torch_and_nccl_versions_are_errors_others_warnings() -> None:
    found = {d.field: d for d in diff(nodes({}, {"torch": "2.12.0", "nccl": "2.20.3",
                                                 "driver": "535.1", "gpus": 4}))}
    assert found["torch"].severity == "error" and found["torch"].finding == "version-mismatch"
    assert found["torch"].values == ((0, "2.13.0"), (1, "2.12.0"))
    assert found["nccl"].severity == "error"
    assert found["driver"].severity == "warning"
    assert found["gpus"].severity == "warning" and found["gpus"].finding == "node-mismatch"
    assert "2.13.0 on node 0; 2.12.0 on node 1" in found["torch"].explanation


def test_missing_nvidia_smi_is_shown_as_such() -> None:
    (found,) = diff(nodes({}, {"gpus": None}))
    assert found.values == ((0, "8"), (1, "no nvidia-smi"))


def test_env_differences_weigh_by_what_the_variable_does() -> None:
    found = {d.field: d for d in diff(nodes(
        {"env": (("NCCL_SOCKET_IFNAME", "=eth1"), ("NCCL_BUFFSIZE", "4194304"))},
        {"env": (("NCCL_IB_DISABLE", "1"), ("NCCL_SOCKET_IFNAME", "=ens5"))},
    ))}
    assert found["NCCL_IB_DISABLE"].severity == "error"  # transports must agree
    assert found["NCCL_IB_DISABLE"].values == ((0, "unset"), (1, "1"))
    assert found["NCCL_BUFFSIZE"].severity == "warning"
    assert found["NCCL_SOCKET_IFNAME"].severity == "info"  # names may differ per node
    assert list(found)[0] == "NCCL_IB_DISABLE"  # errors first


def test_same_value_from_different_origins_is_not_a_difference_but_origin_is_shown() -> None:
    fps = nodes({"env": (("NCCL_IB_DISABLE", "1"),)},
                {"env": (("NCCL_IB_DISABLE", "1"),), "origins": (("NCCL_IB_DISABLE",
                                                                   "/etc/nccl.conf"),)})
    assert diff(fps) == ()
    fps[2] = replace(BASE, hostname="node2", env=(("NCCL_IB_DISABLE", "0"),),
                     origins=(("NCCL_IB_DISABLE", "/root/.nccl.conf"),))
    (found,) = diff(fps)
    assert dict(found.values)[1] == "1 (/etc/nccl.conf)"
    assert dict(found.values)[2] == "0 (/root/.nccl.conf)"


def test_shared_hostnames_are_a_finding() -> None:
    fps = nodes({}, {}, {})
    fps[2] = replace(fps[2], hostname="node0")
    (found,) = diff(fps)
    assert found.field == "hostname" and found.finding == "node-mismatch"
    assert "'node0' on nodes 0, 2" in found.explanation


def test_describe_groups_keeps_first_seen_order() -> None:
    assert describe_groups({0: "b", 1: "a", 2: "b"}) == "b on nodes 0, 2; a on node 1"
