"""causes/ssh_unresolved.py: a launcher's ssh unable to look up a node's name is
peer-unreachable, naming the host. Lines made from OpenSSH's ssh.c (v9.6, main: fatal("%s: Could
not resolve hostname %.100s: %s", __progname, host, ssh_gai_strerror(r))) with glibc's
gai_strerror texts (EAI_NONAME "Name or service not known", EAI_AGAIN "Temporary failure in name
resolution", EAI_NODATA "No address associated with hostname") and macOS's (EAI_NONAME "nodename
nor servname provided, or not known"); as pdsh relays it (pdsh's "%s: %s" host prefix, then
"pdsh@%s: %s: ssh exited with exit code %d") and as Open MPI's rsh launcher's job ends
(orte/mca/plm/base/help-plm-base.txt: "ORTE was unable to reliably start one or more
daemons.")."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

SSH = "ssh: Could not resolve hostname {host}: {words}"


@pytest.mark.parametrize("words", ["Name or service not known",
                                   "Temporary failure in name resolution",
                                   "No address associated with hostname",
                                   "nodename nor servname provided, or not known"])
@pytest.mark.parametrize(("host", "before", "after"), [
    ("worker-1", "", []),
    ("node2", "node2: ", ["pdsh@node1: node2: ssh exited with exit code 255"]),
    ("all-reduce-worker-1.all-reduce.default.svc", "",
     ["", "ORTE was unable to reliably start one or more daemons."]),
    ("gpu07.cluster.local", "[launcher] ", []),
])
def test_a_node_s_name_that_does_not_resolve(tmp_path: Path, words: str, host: str, before: str,
                                             after: list[str]) -> None:
    found = top(tmp_path, [before + SSH.format(host=host, words=words), *after])
    assert (found.id, found.severity) == ("peer-unreachable", "error")
    assert host in found.explanation
    assert "getent hosts" in found.fix


@pytest.mark.parametrize("line", [
    "Could not resolve hostname for the dashboard, using 127.0.0.1",
    "[W ProcessGroupGloo.cpp:694] Warning: Unable to resolve hostname to a (local) address. Using "
    "the loopback address as fallback. Manually set the network interface to bind to with "
    "GLOO_SOCKET_IFNAME. (function operator())",
])
def test_other_programs_resolving_names_are_not_this_cause(tmp_path: Path, line: str) -> None:
    found = top(tmp_path, [line])
    assert "ssh on the launching node" not in found.explanation
