"""causes/gloo_hostname.py: Gloo finding no address for this machine's hostname is told apart from
an interface that does not exist. Lines made from Gloo's device.cc (tcp and uv transports,
2017-2025: GLOO_ENFORCE(..., "Unable to find address for: ", attr.hostname) and the same words
for attr.iface), as torch raises them ("RuntimeError: [enforce fail at <path>/device.cc:<line>]
rp != nullptr. Unable to find address for: <name>"), with hostnames as macOS (".local"), Windows
("DESKTOP-" and seven characters), cloud DNS and long cluster names give them, and interface names
as Linux (IFNAMSIZ 16, VLAN "eth0.100"), NCCL-style prefixes and macOS give them."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

from ddpkit.doctor.log.causes.gloo_hostname import hostname_shaped

RAISED = ("RuntimeError: [enforce fail at {path}/third_party/gloo/gloo/transport/{transport}/"
          "device.cc:{line}] {check}. Unable to find address for: {name}")


def _lines(name: str, transport: str = "tcp") -> list[str]:
    return ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
            '    dist.init_process_group("gloo")',
            RAISED.format(path="/opt/pytorch", transport=transport, line=153 if transport == "uv"
                          else 83, check="rp != nullptr" if transport == "uv" else
                          "ifa != nullptr", name=name)]


@pytest.mark.parametrize("name", ["MacBook-Pro.local", "DESKTOP-4F2K9QX", "node1.cluster.internal",
                                  "ip-10-0-0-5.ec2.internal", "gpu-worker-node-000123"])
@pytest.mark.parametrize("transport", ["tcp", "uv"])
def test_a_hostname_with_no_address_to_bind(tmp_path: Path, name: str, transport: str) -> None:
    found = top(tmp_path, _lines(name, transport))
    assert (found.id, found.severity) == ("interface-not-found", "error")
    assert name in found.explanation and "hostname" in found.explanation
    assert "does not exist on this node" not in found.explanation
    assert "/etc/hosts" in found.fix and "GLOO_SOCKET_IFNAME" in found.fix


@pytest.mark.parametrize("name", ["eth0", "^lo", "ens3f0", "eth0.100", "enp0s31f6", "en0", "ib0"])
def test_an_interface_name_is_still_an_interface(tmp_path: Path, name: str) -> None:
    assert not hostname_shaped(name.lstrip("^="))
    found = top(tmp_path, _lines(name))
    assert found.id == "interface-not-found"
    assert "does not exist on this node" in found.explanation
