"""causes/restarted_workers.py: a restarted attempt refused at an address of the attempt before
(torchrun's agent shares its store with the workers; pytorch/pytorch#135712). Sources of the
lines:

- torch v2.13.0 torch/distributed/elastic/multiprocessing/api.py: the agent logs the first
  failure of each attempt once, ``"failed (exitcode: %s) local_rank: %s (pid: %s) of binary: %s"``
  at error level, after glog's header
- gloo's tcp/debug_logger.cc ("ERROR failed to connect, willRetry=%d, retry=%d, retryLimit=%d,
  rank=%d, size=%d, local=%s, remote=%s, error=%s") and torch's ProcessGroupGloo.cpp ("Gloo
  connectFullMesh failed with %s"), with pair.cc's "timed out connecting: SO_ERROR: %s,
  remote=%s"
- CPython's traceback and ``KeyError: 'labels'`` (a rank's own failure), torch's "[rankN]: " tag
- torchrun's --log-dir layout: <start>/attempt_<N>/<local rank>/stderr.log (DefaultLogsSpecs)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.log.diagnose import diagnose

AGENT = ("E1207 02:18:{second}.565000 6362 torch/distributed/elastic/multiprocessing/api.py:1002]"
         " failed (exitcode: 1) local_rank: {local} (pid: {pid}) of binary: /usr/bin/python3")
OWN = ["[rank1]: Traceback (most recent call last):",
       '[rank1]:   File "/work/train.py", line 5, in <module>', "[rank1]: KeyError: 'labels'",
       "[rank0]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
       "Connection closed by peer [{host}]:5551"]
REFUSED = ["[/pytorch/third_party/gloo/gloo/transport/tcp/debug_logger.cc:9] ERROR failed to "
           "connect, willRetry=0, retry=4, retryLimit=3, rank=1, size=2, local=[{host}]:39114, "
           "remote=[{host}]:39308$1, error=SO_ERROR: Connection refused, remote=[{host}]:39308$1",
           "RuntimeError: Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/"
           "transport/tcp/pair.cc:152] timed out connecting: SO_ERROR: Connection refused, "
           "remote=[{host}]:39308$1"]


def _lines(host: str, attempts: int) -> list[str]:
    lines = [line.format(host=host) for line in OWN] + [AGENT.format(second=24, local=1, pid=6387)]
    if attempts > 1:
        lines += [line.format(host=host) for line in REFUSED]
        lines.append(AGENT.format(second=26, local=0, pid=6398))
    return lines


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_a_restart_refused_at_loopback_on_one_machine_is_the_restart(tmp_path: Path,
                                                                     host: str) -> None:
    log = tmp_path / "console.log"
    log.write_text("\n".join(_lines(host, 2)) + "\n")
    found = diagnose([str(log)])
    assert [(f.id, f.severity) for f in found] == [("rank-failed", "error"),
                                                   ("rendezvous-config", "warning")]
    assert "KeyError: 'labels'" in found[0].explanation
    assert "pid 6387, then pid 6398" in found[1].explanation


def test_a_refusal_before_any_restart_is_not_the_restart(tmp_path: Path) -> None:
    # one attempt: the agent reported one failure, and the refusal came before it
    log = tmp_path / "console.log"
    log.write_text("\n".join([*(line.format(host="127.0.0.1") for line in REFUSED),
                              AGENT.format(second=24, local=1, pid=6387)]) + "\n")
    assert all(f.id != "rendezvous-config" for f in diagnose([str(log)]))


def test_a_job_across_machines_keeps_its_loopback_reading(tmp_path: Path) -> None:
    # two machines ([node0:0]/[node1:0], pdsh-style labels): loopback is the misconfiguration
    lines = _lines("127.0.1.1", 2)
    log = tmp_path / "console.log"
    log.write_text("\n".join(f"[node{i % 2}:0] {line}" for i, line in enumerate(lines)) + "\n")
    found = diagnose([str(log)])
    assert all(f.id != "rendezvous-config" for f in found)
    assert "wrong-interface" in [f.id for f in found]


def test_a_log_dir_with_a_later_attempt_is_a_restart(tmp_path: Path) -> None:
    start = tmp_path / "none_abc"
    for attempt in (0, 1):
        for rank in (0, 1):
            (start / f"attempt_{attempt}" / str(rank)).mkdir(parents=True)
    (start / "attempt_0" / "1" / "stderr.log").write_text("\n".join(OWN[:3]) + "\n")
    (start / "attempt_0" / "0" / "stderr.log").write_text(OWN[3].format(host="127.0.0.1") + "\n")
    (start / "attempt_1" / "1" / "stderr.log").write_text(
        "\n".join(line.format(host="127.0.0.1") for line in REFUSED) + "\n")
    (start / "attempt_1" / "0" / "stderr.log").write_text("")
    found = diagnose([str(tmp_path)])
    assert [(f.id, f.severity) for f in found][:2] == [("rank-failed", "error"),
                                                       ("rendezvous-config", "warning")]
    assert "a later attempt" in found[1].explanation
