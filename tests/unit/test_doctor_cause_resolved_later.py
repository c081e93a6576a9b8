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


@pytest.mark.parametrize(("code", "text"), GAI)
def test_the_resolvers_own_words_are_quoted(tmp_path: Path, code: int, text: str) -> None:
    found = top(tmp_path, [LOOKUP.format(host="node0", code=code, text=text)] * 3)
    assert found.id == "rendezvous-config" and f"({text})" in found.explanation
    other = GAI[1][1] if code == GAI[0][0] else GAI[0][1]
    assert other not in found.explanation
    assert "--local-addr" in found.fix  # (the c10d rendezvous hands the workers node 0's name)


def test_another_host_refused_says_nothing_of_the_name(tmp_path: Path) -> None:
    found = top(tmp_path, [LOOKUP.format(host="trainer-master", code=-2, text=GAI[0][1]),
                           CONNECT.format(host="10.0.0.9", n=111, text="Connection refused")])
    assert "resolved later" not in found.explanation


def test_c10d_s_retried_lookup_alone_says_it_retries_not_that_no_rank_can_reach(
        tmp_path: Path) -> None:
    # socket.cpp's tryConnect(family) looks the name up again until its connect timeout: a lookup
    # that failed once shows a wait, which a name whose record appears later (a pod's) ends
    found = top(tmp_path, [LOOKUP.format(host="workers-0-0.workers", code=-2, text=GAI[0][1])
                           .replace("IPv4", "IPv6")])
    assert (found.id, found.severity) == ("rendezvous-config", "warning")
    assert "looks it up again until its connect timeout" in found.explanation
    assert "could not even start" not in found.explanation


def test_a_lookup_that_gave_up_says_no_rank_can_reach_the_store(tmp_path: Path) -> None:
    # Python's socket module raising (CPython's socketmodule.c: socket.gaierror, "[Errno -2]
    # Name or service not known"), which no retry follows
    found = top(tmp_path, [LOOKUP.format(host="trainer-master", code=-2, text=GAI[0][1]),
                           "socket.gaierror: [Errno -2] Name or service not known"])
    assert found.id == "rendezvous-config"
    assert "so no rank can reach the store" in found.explanation
