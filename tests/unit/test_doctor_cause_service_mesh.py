"""A service mesh's sidecar intercepting the training pods' connections
(causes/service_mesh.py).

The lines are Envoy's debug log as `kubectl logs <pod> -c istio-proxy` prints it (Istio's
format: "<RFC 3339 time>\\t<level>\\tenvoy <component>\\t<message>"), its upstream component on
the cluster Istio names for each intercepted port of the pod ("inbound|<port>||" from Istio 1.10,
"inbound|<port>|<name>|<service FQDN>" before), with the ports torch's launchers and Kubeflow's
PyTorchJob use.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.diagnose import diagnose

ENVOY = "2022-07-19T18:01:59.{us:06d}Z\tdebug\tenvoy {component}\t{message}"


def envoy_lines(cluster: str) -> list[str]:
    return [ENVOY.format(us=173713, component="connection", message="[C72] remote early close"),
            ENVOY.format(us=173804, component="connection", message="[C72] closing socket: 0"),
            ENVOY.format(us=211667, component="upstream",
                         message=f"membership update for TLS cluster {cluster} added 0 removed 1"),
            ENVOY.format(us=211713, component="upstream",
                         message=f"removing hosts for TLS cluster {cluster} removed 1")]


@pytest.mark.parametrize(("cluster", "port"), [
    ("inbound|23456||", "23456"), ("inbound|29500||", "29500"),
    ("inbound|29500|tcp-master|pytorch-job-master-0.kubeflow.svc.cluster.local", "29500")])
def test_envoy_intercepting_a_port_of_the_pod_is_the_mesh_in_the_way(
        tmp_path: Path, cluster: str, port: str) -> None:
    found = top(tmp_path, envoy_lines(cluster))
    assert (found.id, found.severity) == ("firewall", "warning")
    assert f"on port {port}:" in found.explanation and "Envoy" in found.explanation
    assert 'sidecar.istio.io/inject: "false"' in found.fix


def test_with_the_run_failing_it_is_an_error(tmp_path: Path) -> None:
    lines = [*envoy_lines("inbound|23456||"),
             "RuntimeError: Timed out initializing process group in store based barrier on rank: "
             "0, for key: store_based_barrier_key:1 (world_size=2, worker_count=1, "
             "timeout=0:30:00)"]
    found = [f for f in top_all(tmp_path, lines) if f.id == "firewall"]
    assert found and found[0].severity == "error"


def test_envoy_without_an_inbound_cluster_and_other_inbound_words_say_nothing(
        tmp_path: Path) -> None:
    lines = [ENVOY.format(us=1, component="main", message="flushing stats"),
             "route inbound|80|| rewritten by nginx", "epoch 1 loss 0.42"]
    assert top(tmp_path, lines).id != "firewall"


def top_all(tmp_path: Path, lines: list[str]) -> list[Finding]:
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose([str(log)])
