"""Join tokens (``ddpk://ADDR:PORT/<run-id>/<secret>``) and the signed JSON the job store holds.

The job store is torch's own c10d ``TCPStore``, which has no authentication: anyone on the network
can read or write its keys. Every value ddpkit puts there is therefore JSON with an HMAC-SHA256 of
the token's secret over the key and the body, so a node only acts on values written by someone who
holds the token. The secret itself never enters the store. (The HMAC proves who wrote a value; it
does not hide it: run jobs on a private network.) Values are JSON, nothing else.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddpkit.errors import ConfigError, JobFailed

SCHEME = "ddpk://"
DEFAULT_JOIN_PORT = 29400  # c10d's default rendezvous port
_TOKEN = re.compile(
    r"ddpk://(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<v4>[0-9.]+)):(?P<port>\d{1,5})"
    r"/(?P<run>[a-z0-9]{4,32})/(?P<secret>[A-Za-z0-9_-]{16,128})"
)


@dataclass(frozen=True)
class JoinToken:
    address: str  # the master's address on the interface other nodes route to
    port: int  # the job store's port
    run_id: str
    secret: str

    def __str__(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{SCHEME}{host}:{self.port}/{self.run_id}/{self.secret}"

    @property
    def endpoint(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.port}"

    def key(self, name: str) -> str:
        """The store key for ``name`` in this run (runs never share keys)."""
        return f"ddpkit/{self.run_id}/{name}"


def new_token(address: str, port: int) -> JoinToken:
    """A fresh run id and secret (from :mod:`secrets`) for a job store at ``address:port``."""
    return JoinToken(address=ipaddress.ip_address(address).compressed, port=port,
                     run_id=secrets.token_hex(6), secret=secrets.token_urlsafe(24))


def parse_token(text: str) -> JoinToken:
    """A token as the master printed it; ConfigError ``bad-token`` saying what is wrong."""
    value = text.strip()
    if value.startswith("ddpkit join "):
        value = value[len("ddpkit join "):].strip()
    match = _TOKEN.fullmatch(value)
    if not match:
        why = "it does not start with ddpk://" if not value.startswith(SCHEME) else \
            "it is not ddpk://ADDRESS:PORT/RUN-ID/SECRET (was it cut off when copied?)"
        raise ConfigError("bad-token", f"{_redacted(value)!r} is not a ddpkit join token: {why}",
                          "copy the whole `ddpkit join ddpk://...` line the master printed")
    address = match.group("v6") or match.group("v4")
    try:
        address = ipaddress.ip_address(address).compressed
    except ValueError:
        raise ConfigError("bad-token", f"the token's address {address!r} is not an IP address",
                          "copy the whole line the master printed") from None
    port = int(match.group("port"))
    if not 1 <= port <= 65535:
        raise ConfigError("bad-token", f"the token's port {port} is not a TCP port",
                          "copy the whole line the master printed")
    return JoinToken(address=address, port=port, run_id=match.group("run"),
                     secret=match.group("secret"))


def _redacted(text: str) -> str:
    """Never echo a secret back in an error message."""
    head, sep, _ = text.rpartition("/")
    return f"{head}/…" if sep and head.startswith(SCHEME) else text[:40]


def _mac(token: JoinToken, key: str, body: str) -> str:
    message = f"{token.key(key)}\n{body}".encode()
    return hmac.new(token.secret.encode(), message, hashlib.sha256).hexdigest()


def sign(token: JoinToken, key: str, body: Mapping[str, Any]) -> bytes:
    """The stored bytes for ``body`` under ``key``: canonical JSON plus its HMAC."""
    text = json.dumps(dict(body), sort_keys=True, separators=(",", ":"))
    return json.dumps({"body": text, "mac": _mac(token, key, text)}).encode()


def verify(token: JoinToken, key: str, raw: bytes) -> dict[str, Any]:
    """The body of a signed value; JobFailed ``token-rejected`` when it was not signed with this
    token's secret (or is not ddpkit's JSON at all)."""
    try:
        envelope = json.loads(raw.decode("utf-8"))
        body_text, mac = envelope["body"], envelope["mac"]
        if not isinstance(body_text, str) or not isinstance(mac, str):
            raise TypeError("body and mac must be strings")
    except (ValueError, TypeError, KeyError, UnicodeDecodeError) as exc:
        raise _rejected(token, key, f"the value is not ddpkit's signed JSON ({exc})") from None
    if not hmac.compare_digest(mac, _mac(token, key, body_text)):
        raise _rejected(token, key, "its signature does not match this token's secret")
    body = json.loads(body_text)
    if not isinstance(body, dict):
        raise _rejected(token, key, "the signed value is not a JSON object")
    return body


def _rejected(token: JoinToken, key: str, why: str) -> JobFailed:
    return JobFailed(
        "token-rejected",
        f"the job store at {token.endpoint} holds a {key!r} for run {token.run_id} that ddpkit "
        f"cannot trust: {why}",
        "copy the token again from the master's current run (an old or mistyped token, or "
        "someone else writing to that port)",
    )
