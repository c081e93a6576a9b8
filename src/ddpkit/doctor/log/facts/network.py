"""How the programs of a job's network print what they dialled and how it failed: Ray, c10d's
socket, getaddrinfo, /dev/shm paths, rdma-core's mlx5 provider, Gloo's address families (the
regexes facts/extract.py applies to a line, each with the source of its template)."""

from __future__ import annotations

import re

# Ray's own words for a worker that cannot reach the head: python/ray/_private/utils.py
# "Unable to connect to GCS at %s. Check that (1) Ray GCS with matching version started
# successfully at the specified address, and (2) there is no firewall setting preventing
# access.", the C++ GCS client's "Failed to connect to GCS at address %s within %d seconds."
# (gcs_rpc_client.h), before Ray 2 redis_context.cc's "Could not establish connection to redis
# %s:%d (context.err = %d)" and "Failed to connect to Redis, retrying."
RAY_UNREACHED = re.compile(r"Unable to connect to GCS at (\S+?)\.? Check that"
                           r"|Failed to connect to GCS at address (\S+) within"
                           r"|Could not establish connection to redis (\S+) \(context\.err"
                           r"|(Failed to connect to Redis), retrying")
# c10d's (torch/csrc/distributed/c10d/socket.cpp): "The IPv4 network addresses of (%s, %d)
# cannot be retrieved (gai error: %d - %s).", "The client socket has failed to connect to [%s]:%d
# (errno: ...)", "... to any network address of (%s, %d)", "... while trying to connect to (%s,
# %d)."; NCCL's socket code (src/misc/socket.cc, ncclSocketToString's "<address><<port>>"):
# "socketStartConnect: Connect to %s failed : %s", before 2.12 "Connect to %s failed : %s"
DIALLED = re.compile(r"network addresses of \(([^,()\s]+), (\d{1,5})\)"
                     r"|connect to \[([^\]\s]+)\]:(\d{1,5})"
                     r"|connect to (?:any network address of )?\(([^,()\s]+), (\d{1,5})\)"
                     r"|Connect to ([0-9A-Fa-f.:]+)<(\d{1,5})> failed")
# c10d's lines that name the host and port the job gave it ("... any network address of (%s, %d)",
# "... while trying to connect to (%s, %d)", "The IPv4 network addresses of (%s, %d) ...",
# TCPStore.cpp's "TCP client failed to connect/validate to host %s:%d"), not one resolved address
# of them: its per-attempt lines ("failed to connect to [%s]:%d (errno: ...)") print that, and
# torch 2.13 printed an IPv4 one garbled (a dial of 10.0.0.2:29411 as "[::]:2354",
# "73.86.0.0:3675": tests/fixtures/logs/torchrun-sim/noroute)
C10D_NAMED_TARGET = ("any network address of (", "while trying to connect to (",
                     "network addresses of (", "connect/validate to host ")


def names_c10d_target(text: str) -> bool:
    """Whether a c10d line names the host and port it was given (C10D_NAMED_TARGET)."""
    return any(words in text for words in C10D_NAMED_TARGET)
GAI_ERROR = re.compile(r"gai error: (-\d{1,2})\b")
SHM_PATH = re.compile(r"/dev/shm/[\w.-]+|/dev/shm\b")
# Ray's check of /dev/shm as it starts its object store (ray/_private/services.py, Ray 1.x on:
# "WARNING: The object store is using {} instead of /dev/shm because /dev/shm has only {} bytes
# available. This will harm performance! ... increase /dev/shm size by passing '--shm-size=..."
SHM_AVAILABLE = re.compile(r"/dev/shm has only (\d{1,15}) bytes available")
# rdma-core's mlx5 provider (providers/mlx5/cq.c): "mlx5: <host>: got completion with error:",
# then the CQE in hex, for a failed work completion other than a flush
RDMA_ERROR = re.compile(r"\b(mlx\d): \S+: got completion with error")
# Gloo's GLOO_ENFORCE_EQ in transport/tcp/device.cc (Device::isInitiator, torch v2.4's
# third_party/gloo): "[enforce fail at .../device.cc:N] ss1.ss_family == ss2.ss_family. 2 vs 10"
FAMILY = re.compile(r"ss1\.ss_family == ss2\.ss_family\.? (\d{1,2}) vs (\d{1,2})\b")
