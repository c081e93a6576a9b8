"""causes/topology_file.py: NCCL told by the environment to read its topology or its channel graph
from a file, then failing in its topology code. Sources of the lines (NVIDIA/nccl v2.18.6):

- src/graph/search.cc, ncclTopoCompute: ``INFO(NCCL_ENV, "NCCL_GRAPH_FILE set by environment to
  %s", str)``, then ncclTopoGetGraphFromXml, whose channel import warns ``WARN("XML Import
  Channel : dev %d not found.", dev)``; src/graph/topo.cc, ncclTopoGetSystem: ``INFO(NCCL_ENV,
  "NCCL_TOPO_FILE set by environment to %s", xmlTopoFile)``; src/graph/xml.cc's parser: ``WARN("XML
  Parse : Unexpected trailing %s in %s", ...)``.
- NCCL's debug prefix (src/debug.cc): "<host>:<pid>:<tid> [<dev>] NCCL INFO ..." and, for a WARN,
  "<host>:<pid>:<tid> [<dev>] <file>:<line> NCCL WARN ..."; the return trace "NCCL INFO
  <file>:<line> -> <code>".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

HEAD = "gpu7:2211:2388 [0]"


def env(name: str, value: str) -> str:
    return f"{HEAD} NCCL INFO {name} set by environment to {value}"


def warn(where: str, text: str) -> list[str]:
    return [f"{HEAD} {where} NCCL WARN {text}", f"{HEAD} NCCL INFO {where.split(':')[0]}:733 -> 2"]


@pytest.mark.parametrize(("settings", "where", "text"), [
    ([("NCCL_GRAPH_FILE", "/opt/microsoft/ncv4/graph.xml")], "graph/search.cc:703",
     "XML Import Channel : dev 3 not found."),
    ([("NCCL_TOPO_FILE", "/opt/microsoft/ndv4/topo.xml"),
      ("NCCL_GRAPH_FILE", "/opt/microsoft/ndv4/graph.xml")], "graph/search.cc:703",
     "XML Import Channel : dev 1 not found."),
    ([("NCCL_TOPO_FILE", "/usr/local/share/aws-ofi-nccl/xml/p4d-24xl-topo.xml")],
     "graph/xml.cc:98", "XML Parse : Unexpected trailing > in <cpu numaid"),
])
def test_a_topology_file_refused_is_the_setting(tmp_path: Path, settings: list[tuple[str, str]],
                                                where: str, text: str) -> None:
    lines = [f"{HEAD} NCCL INFO comm 0x55d0 rank 0 nranks 2 cudaDev 0 busId 100000 - Init START",
             *(env(name, value) for name, value in settings), *warn(where, text)]
    found = top(tmp_path, lines)
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert all(f"{name}={value}" in found.explanation for name, value in settings)
    assert text.rstrip(".") in found.explanation
    assert all(name in found.fix for name, _ in settings)


def test_a_topology_warn_without_a_file_setting_is_not_this(tmp_path: Path) -> None:
    found = top(tmp_path, [env("NCCL_SOCKET_IFNAME", "eth1"),
                           *warn("graph/search.cc:703", "XML Import Channel : dev 1 not found.")])
    assert "topology from a file" not in found.explanation


def test_a_file_setting_without_a_topology_warn_is_not_this(tmp_path: Path) -> None:
    found = top(tmp_path, [env("NCCL_TOPO_FILE", "/opt/microsoft/ndv4/topo.xml"),
                           *warn("transport/net_ib.cc:1011", "NET/IB : Got completion from peer "
                                 "10.0.0.3<37128> with error 12, opcode 0, len 0, vendor err 129")])
    assert "topology from a file" not in found.explanation
