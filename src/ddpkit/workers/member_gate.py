"""The membership gate: every rank proves it holds the job's secret before the user's script runs.

torchrun's static rendezvous lets anyone who reaches the master's port join as a node: it has no
authentication, and torch offers no hook into it. Where ddpkit has a secret that every node holds
(``DDPKIT_JOB_SECRET`` in the node's environment: a join token's job and ``--hosts`` carry one,
per node the user sets the same one on every machine), torchrun starts this module in each rank
instead of the user's entry, and it runs the entry (``os.execve``: the same process, a fresh
interpreter, the command torchrun would have run) only once the whole job has passed:

1. rank 0 (on the master, the machine that hosts torchrun's store) puts a fresh nonce, with its
   MAC, under ``ddpkit/member/nonce`` in torchrun's own store (JSON bytes);
2. every rank puts its proof under ``ddpkit/member/rank/<R>``: its address (the source address of
   a connection to the store, as the master sees it) and an HMAC-SHA256, under a key derived
   from the secret, over the nonce, its rank and that address;
3. rank 0 waits for every rank's proof (at most :data:`WAIT_S`), checks each, and compares the
   addresses that hold a connection to the store's port (``/proc/net/tcp``: the kernel's word,
   not a claim) with the proven ones: a connection from an address that proved nothing is a
   stranger's torchrun; then it puts the verdict, with its MAC, under ``ddpkit/member/verdict``;
4. every rank reads the verdict: on a failure it exits (code :data:`EXIT_CODE`) naming the
   stranger's address before any rank has called ``init_process_group``, so no rank's data
   goes to the stranger.

Run as ``python -m ddpkit.workers.member_gate [--module] ENTRY ARGS...``.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import socket
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

SECRET_ENV = "DDPKIT_JOB_SECRET"
WAIT_S = 20.0  # for every rank's proof: the ranks of every node start at the same rendezvous
WAIT_ENV = "DDPKIT_MEMBER_WAIT_S"  # another bound (tests)
EXIT_CODE = 3
PREFIX = "ddpkit/member/"
NONCE, VERDICT = PREFIX + "nonce", PREFIX + "verdict"
_PURPOSE = b"ddpkit membership v1"
_ESTABLISHED = "01"


def member_key(secret: str) -> bytes:
    """The key proofs are made with (not the secret itself, which serves other uses too)."""
    return hmac.new(secret.encode(), _PURPOSE, hashlib.sha256).digest()


def mac(key: bytes, *parts: object) -> str:
    return hmac.new(key, "|".join(map(str, parts)).encode(), hashlib.sha256).hexdigest()


def proof_key(rank: int) -> str:
    return f"{PREFIX}rank/{rank}"


def proof(key: bytes, nonce: str, rank: int, address: str) -> dict[str, Any]:
    return {"rank": rank, "address": address, "mac": mac(key, nonce, rank, address)}


def signed(key: bytes, nonce: str, body: Mapping[str, Any]) -> bytes:
    """``body`` with a MAC over it and the nonce, as the JSON bytes the store holds."""
    text = json.dumps(dict(body), sort_keys=True, separators=(",", ":"))
    return json.dumps({"body": text, "mac": mac(key, nonce, text)}).encode()


def opened(key: bytes, nonce: str, raw: bytes) -> dict[str, Any] | None:
    """The body of a :func:`signed` value, or None when it was not signed with this key/nonce."""
    try:
        outer = json.loads(raw[:65536].decode())
        text, given = outer["body"], outer["mac"]
        if not (isinstance(text, str) and isinstance(given, str)
                and hmac.compare_digest(given, mac(key, nonce, text))):
            return None
        body = json.loads(text)
    except (ValueError, TypeError, KeyError, UnicodeDecodeError, RecursionError):
        return None
    return body if isinstance(body, dict) else None


def check_proof(key: bytes, nonce: str, rank: int, raw: bytes | None) -> str | None:
    """The proven address of ``rank``, or None (no proof, or one that does not check)."""
    if raw is None:
        return None
    try:
        found = json.loads(raw[:4096].decode())
        address, given = found["address"], found["mac"]
    except (ValueError, TypeError, KeyError, UnicodeDecodeError, RecursionError):
        return None
    if not (isinstance(address, str) and isinstance(given, str) and found.get("rank") == rank):
        return None
    return address if hmac.compare_digest(given, mac(key, nonce, rank, address)) else None


def plain_address(text: str) -> str:
    """``::ffff:10.0.0.2`` -> ``10.0.0.2``; anything else unchanged."""
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return text
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)


def _proc_address(hex_text: str) -> str:
    """An address as ``/proc/net/tcp{,6}`` writes it (32-bit words in host byte order)."""
    raw = bytes.fromhex(hex_text)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)) if sys.byteorder == "little" else raw
    return plain_address(str(ipaddress.ip_address(words)))


def peers_of_port(tables: Iterable[str], port: int) -> set[str]:
    """Remote addresses of established connections to local ``port``, from the text of
    ``/proc/net/tcp`` and ``/proc/net/tcp6``, less connections from this machine to itself (the
    remote address is one of its own local ones)."""
    remote: set[str] = set()
    local: set[str] = set()
    for table in tables:
        for line in table.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 4 or fields[3] != _ESTABLISHED:
                continue
            try:
                (l_addr, l_port), (r_addr, _r_port) = (f.split(":") for f in fields[1:3])
                local.add(_proc_address(l_addr))
                if int(l_port, 16) == port:
                    remote.add(_proc_address(r_addr))
            except ValueError:
                continue
    return {a for a in remote if a not in local and not ipaddress.ip_address(a).is_loopback}


def strangers(connected: set[str], proven: Iterable[str]) -> list[str]:
    """Addresses holding a connection to the store that no rank's proof names."""
    return sorted(connected - {plain_address(a) for a in proven})


def verdict(key: bytes, nonce: str, world: int, proofs: Mapping[int, bytes | None],
            connected: set[str]) -> dict[str, Any]:
    """Rank 0's judgment: every rank proven and no connection from elsewhere (pure)."""
    proven = {r: check_proof(key, nonce, r, proofs.get(r)) for r in range(world)}
    missing = [r for r, a in proven.items() if a is None]
    others = strangers(connected, [a for a in proven.values() if a])
    return {"ok": not missing and not others, "missing": missing, "strangers": others,
            "proven": {str(r): a for r, a in proven.items() if a}}


def describe_failure(found: Mapping[str, Any], port: int) -> str:
    """The line every rank prints before it exits. English, like everything a rank prints: ddpkit's
    failure summary quotes a rank's last lines as the rank wrote them."""
    missing = ", ".join(map(str, found.get("missing", [])))
    others = ", ".join(map(str, found.get("strangers", [])))
    causes = []
    if others:
        causes.append(f"a connection to torchrun's store (port {port}) came from {others}, "
                      "which proved nothing")
    if missing:
        causes.append(f"rank(s) {missing} did not prove they hold the job's secret")
    return ("ddpkit membership check failed: " + "; ".join(causes) + ". Someone who is not one "
            "of this job's nodes joined it; every rank stopped before its script ran, so no rank's "
            "data went to it. Find who runs torchrun there, and keep the master's port closed to "
            "machines that are not this job's (see the threat model in docs/multi-node.md)")


# -- the edge: torchrun's store, the kernel's tables, the exec -----------------------------------


def _own_address(master: str, port: int) -> str:
    with socket.create_connection((master, port), timeout=10.0) as probe:
        return plain_address(str(probe.getsockname()[0]))


def _connected(port: int) -> set[str]:
    tables = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            tables.append(Path(name).read_text())
        except OSError:
            continue
    return peers_of_port(tables, port)


def _get(store: Any, key: str) -> bytes | None:
    return bytes(store.get(key)) if store.check([key]) else None


def _wait_for(store: Any, read: Any, deadline: float) -> Any:
    while (found := read()) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    return found


def gate(secret: str, env: Mapping[str, str]) -> None:
    """Prove this rank and wait for the verdict; SystemExit(EXIT_CODE) when the job failed it."""
    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    master, port = env["MASTER_ADDR"], int(env["MASTER_PORT"])
    wait_s = float(env.get(WAIT_ENV) or WAIT_S)
    key = member_key(secret)
    store: Any = TCPStore(master, port, None, False, datetime.timedelta(seconds=wait_s))
    deadline = time.monotonic() + wait_s
    if rank == 0:
        nonce = secrets.token_hex(16)
        store.set(NONCE, signed(key, "", {"nonce": nonce}))
    else:
        issued = _wait_for(store, lambda: _nonce(store, key), deadline + wait_s)
        if issued is None:
            _fail(_no_verdict(port, wait_s))
        nonce = issued
    address = _own_address(master, port)
    store.set(proof_key(rank), json.dumps(proof(key, nonce, rank, address)).encode())
    if rank == 0:
        _wait_for(store, lambda: True if all(store.check([proof_key(r)]) for r in range(world))
                  else None, deadline)
        found = verdict(key, nonce, world, {r: _get(store, proof_key(r)) for r in range(world)},
                        _connected(port))
        store.set(VERDICT, signed(key, nonce, found))
    else:
        found = _wait_for(store, lambda: _verdict(store, key, nonce), deadline + 2 * wait_s)
    if found is None:
        _fail(_no_verdict(port, wait_s))
    if not found.get("ok"):
        _fail(describe_failure(found, port))


def _nonce(store: Any, key: bytes) -> str | None:
    raw = _get(store, NONCE)
    body = opened(key, "", raw) if raw is not None else None
    value = body.get("nonce") if body else None
    return value if isinstance(value, str) else None


def _verdict(store: Any, key: bytes, nonce: str) -> dict[str, Any] | None:
    raw = _get(store, VERDICT)
    return opened(key, nonce, raw) if raw is not None else None


def _no_verdict(port: int, wait_s: float) -> str:
    return (f"ddpkit membership check failed: rank 0 gave no verdict within {3 * wait_s:g} s "
            f"(its nonce or verdict in torchrun's store on port {port} was missing or not signed "
            "with the job's secret): the job stopped before any script ran")


def _fail(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
    raise SystemExit(EXIT_CODE)


def entry_argv(orig_argv: Sequence[str], args: Sequence[str]) -> list[str]:
    """The command torchrun would have run: the interpreter and its flags from ``orig_argv``
    (everything before ``-m ddpkit.workers.member_gate``), then ``[-m] ENTRY ARGS...``."""
    here = list(orig_argv).index(__spec__.name if __spec__ else "ddpkit.workers.member_gate")
    prefix = list(orig_argv[:here - 1])
    rest = list(args)
    if rest[:1] == ["--module"]:
        return [*prefix, "-m", *rest[1:]]
    return [*prefix, *rest]


def main() -> None:
    env = dict(os.environ)
    secret = env.pop(SECRET_ENV, "")  # the user's script never sees it
    if secret:
        gate(secret, env)
    argv = entry_argv(sys.orig_argv, sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)


if __name__ == "__main__":
    main()
