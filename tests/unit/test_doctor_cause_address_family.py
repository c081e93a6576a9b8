"""causes/address_family.py: Gloo's enforce that two ranks' addresses share a family is
node-mismatch. Sources of the lines:

- gloo (as vendored by torch v2.4.0, third_party/gloo) gloo/transport/tcp/device.cc,
  Device::isInitiator: ``GLOO_ENFORCE_EQ(ss1.ss_family, ss2.ss_family)``
- gloo/common/logging.h, GLOO_ENFORCE_EQ: EnforceNotMet's "[enforce fail at {file}:{line}]
  {condition}. {a} vs {b}"; torch re-raises it as ``RuntimeError``, torchrun's rank prefix
  "[rank0]: " before it
- Linux bits/socket.h: AF_INET 2, AF_INET6 10
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

ENFORCE = ("{prefix}RuntimeError: [enforce fail at {path}/gloo/transport/tcp/device.cc:{line}] "
           "ss1.ss_family == ss2.ss_family. {a} vs {b}")


@pytest.mark.parametrize("path,line", [("../third_party/gloo", 276), ("/opt/gloo", 285)])
@pytest.mark.parametrize("a,b", [("2", "10"), ("10", "2")])
def test_ranks_of_two_address_families_are_a_node_mismatch(tmp_path: Path, path: str, line: int,
                                                           a: str, b: str) -> None:
    found = top(tmp_path, [ENFORCE.format(prefix="[rank1]: ", path=path, line=line, a=a, b=b)])
    assert (found.id, found.severity) == ("node-mismatch", "error")
    assert "IPv4 (AF_INET)" in found.explanation and "IPv6 (AF_INET6)" in found.explanation
    assert "GLOO_SOCKET_IFNAME" in found.fix


def test_both_ranks_lines_are_quoted(tmp_path: Path) -> None:
    lines = [ENFORCE.format(prefix=f"[rank{r}]: ", path="../third_party/gloo", line=276, a=a, b=b)
             for r, (a, b) in enumerate([("2", "10"), ("10", "2")])]
    found = top(tmp_path, lines)
    assert found.id == "node-mismatch" and len(found.evidence) == 2


def test_another_gloo_enforce_is_not_this_cause(tmp_path: Path) -> None:
    line = ("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:446] "
            "op.preamble.length <= op.nbytes. 8 vs 4")
    assert top(tmp_path, [line]).id != "node-mismatch"
