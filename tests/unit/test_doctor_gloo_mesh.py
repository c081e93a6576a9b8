"""A bare Gloo full-mesh failure (issue 24): the advertised address is the setting in play."""

from __future__ import annotations

from pathlib import Path

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose

MESH = ("[rank1]:[E528 08:52:46.164295950 ProcessGroupGloo.cpp:145] Gloo connectFullMesh failed "
        "with [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:144] no error\n")


def run(tmp_path: Path, text: str) -> list[Finding]:
    log = tmp_path / "run.log"
    log.write_text(text)
    return diagnose([str(log)])


def test_a_bare_mesh_failure_names_the_advertised_interface(tmp_path: Path) -> None:
    findings = run(tmp_path, MESH)
    assert (findings[0].id, findings[0].severity) == ("wrong-interface", "error")
    assert "GLOO_SOCKET_IFNAME" in findings[0].fix
    assert "firewall" in findings[0].explanation
    assert findings[0].evidence[0].line == 1


def test_a_mesh_failure_with_a_refused_peer_address_is_left_to_the_connect_rules(
        tmp_path: Path) -> None:
    findings = run(tmp_path, "RuntimeError: Gloo connectFullMesh failed with [pair.cc:152]\n"
                   "  timed out connecting: SO_ERROR: Connection refused, remote=[10.0.0.7]:9\n")
    assert findings[0].id == "peer-unreachable"
    assert not any("names no peer address" in f.explanation for f in findings)


def test_no_mesh_line_no_mesh_finding(tmp_path: Path) -> None:
    findings = run(tmp_path, "[Gloo] Rank 0 is connected to 1 peer ranks. Expected number of "
                   "connected peer ranks is : 1\n")
    # the mesh is complete: no Gloo finding; the log stops there (no end of the run in it)
    assert [f.id for f in findings] == ["no-result"]
    assert "Gloo connected its ranks" in findings[0].explanation
