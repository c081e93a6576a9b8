"""causes/resolved_later.py: a master name that did not resolve, then a refused connect to the
same name, is a master dialled before it was up (peer-unreachable), not a wrong name. Sources:

- torch v2.3.0 torch/csrc/distributed/c10d/socket.cpp: "The {IPv4|IPv6} network addresses of
  ({host}, {port}) cannot be retrieved (gai error: {code} - {text})." and "The client socket has
  failed to connect to [{host}]:{port} (errno: {n} - {text})."
- glibc netdb.h / gai_strerror(3): EAI_NONAME -2 "Name or service not known", EAI_AGAIN -3
  "Temporary failure in name resolution"; errno ECONNREFUSED 111 "Connection refused".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

LOOKUP = ("[W socket.cpp:601] [c10d] The IPv4 network addresses of ({host}, 29500) cannot be "
          "retrieved (gai error: {code} - {text}).")
CONNECT = ("[W socket.cpp:663] [c10d] The client socket has failed to connect to [{host}]:29500 "
           "(errno: {n} - {text}).")
GAI = [(-2, "Name or service not known"), (-3, "Temporary failure in name resolution")]


@pytest.mark.parametrize(("code", "text"), GAI)
@pytest.mark.parametrize("host", ["master-0.job.svc", "trainer-master"])
def test_a_name_that_resolved_later_was_dialled_too_early(tmp_path: Path, host: str, code: int,
                                                          text: str) -> None:
    found = top(tmp_path, [LOOKUP.format(host=host, code=code, text=text),
                           CONNECT.format(host=host, n=111, text="Connection refused")])
    assert (found.id, found.severity) == ("peer-unreachable", "error")
    assert host in found.explanation and "resolved later" in found.explanation


def test_a_name_that_never_resolves_stays_a_configuration_error(tmp_path: Path) -> None:
    found = top(tmp_path, [LOOKUP.format(host="trainer-master", code=-2, text=GAI[0][1])] * 3)
    assert found.id == "rendezvous-config"


def test_another_host_refused_says_nothing_of_the_name(tmp_path: Path) -> None:
    found = top(tmp_path, [LOOKUP.format(host="trainer-master", code=-2, text=GAI[0][1]),
                           CONNECT.format(host="10.0.0.9", n=111, text="Connection refused")])
    assert "resolved later" not in found.explanation
