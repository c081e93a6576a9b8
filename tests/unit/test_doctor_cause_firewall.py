"""causes/firewall.py: Ray's own message for a worker that cannot reach its head is named
firewall; an errno alone is not (the network rules' reading of a connect stands). Sources of
the lines:

- Ray 2.9.0 python/ray/_private/utils.py: "Unable to connect to GCS at {address}. Check that
  (1) Ray GCS with matching version started successfully at the specified address, and (2)
  there is no firewall setting preventing access." (logged at WARNING, Ray's format
  "<time>\\tWARNING utils.py:N -- <message>")
- Ray 2.9.0 src/ray/rpc/gcs_server/gcs_rpc_client.h: "Failed to connect to GCS at address
  {address} within {n} seconds."
- Ray 1.0 src/ray/gcs/redis_context.cc: RAY_LOG(WARNING) "Failed to connect to Redis,
  retrying." and RAY_LOG(FATAL) "Could not establish connection to redis {address}:{port}
  (context.err = {err})" (glog's "W"/"F" levels)
- torch v2.3.0 torch/csrc/distributed/c10d/socket.cpp: "The client socket has failed to connect
  to [{addr}]:{port} (errno: {n} - {strerror})."
errno numbers and texts: Linux asm-generic/errno.h, strerror(3).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

ADDRESSES = ["10.0.0.2", "172.31.207.130", "192.168.1.20", "203.0.113.7"]  # private, public
RAY_GCS = ("2024-03-01 10:00:00,000\tWARNING utils.py:1416 -- Unable to connect to GCS at "
           "{addr}:6379. Check that (1) Ray GCS with matching version started successfully at "
           "the specified address, and (2) there is no firewall setting preventing access.")
RAY_GCS_CPP = ("[2024-03-01 10:00:05,000 W 4242 4242] gcs_rpc_client.h:151: Failed to connect to "
               "GCS at address {addr}:6379 within 5 seconds.")
RAY_REDIS = ["W0301 10:00:00.000000 4242 4242 redis_context.cc:303] Failed to connect to Redis, "
             "retrying.",
             "F0301 10:00:01.000000 4242 4242 redis_context.cc:298] Could not establish "
             "connection to redis {addr}:6379 (context.err = 1)"]
C10D = ("[W socket.cpp:663] [c10d] The client socket has failed to connect to [{addr}]:29500 "
        "(errno: {n} - {text}).")


@pytest.mark.parametrize("addr", ADDRESSES)
def test_rays_own_words_name_a_firewall(tmp_path: Path, addr: str) -> None:
    for lines, severity in (([RAY_GCS.format(addr=addr)], "warning"),
                            ([RAY_GCS_CPP.format(addr=addr)], "warning"),
                            ([line.format(addr=addr) for line in RAY_REDIS], "error")):
        found = top(tmp_path, lines)
        assert (found.id, found.severity) == ("firewall", severity), lines
        assert addr in found.explanation and "ray --version" in found.fix


@pytest.mark.parametrize(("n", "text", "expected"), [
    (113, "No route to host", "wrong-interface"),  # causes/no_route.py: no route, no firewall
    (110, "Connection timed out", "peer-unreachable")])
def test_the_network_rules_reading_of_a_connect_stands(tmp_path: Path, n: int, text: str,
                                                       expected: str) -> None:
    found = top(tmp_path, [C10D.format(addr="10.0.0.2", n=n, text=text)])
    assert found.id == expected


@pytest.mark.parametrize("addr", ["127.0.0.1", "localhost"])
def test_loopback_or_a_refusal_is_no_firewall(tmp_path: Path, addr: str) -> None:
    assert top(tmp_path, [RAY_GCS.format(addr=addr)]).id != "firewall"
    assert top(tmp_path, ["ConnectionRefusedError: [Errno 111] Connection refused"]).id \
        != "firewall"
