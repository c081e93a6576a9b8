"""Join tokens (``ddpk://ADDR:PORT/<run-id>/<secret>``) and the sealed JSON the job store holds.

The job store is torch's own c10d ``TCPStore``, which has no authentication: anyone who reaches it
can read or write its keys. Every value ddpkit puts there is therefore sealed: JSON encrypted and
authenticated (ChaCha20-Poly1305 from ``cryptography``) with a key derived from the token's secret
(HKDF-SHA256, salted with the run id), with the full store key as associated data. Without the
secret a value is noise; a forged, altered or moved value fails to open, and a node acts only on
values that open. The secret itself never enters the store. Values are JSON, nothing else.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ddpkit.errors import ConfigError
from ddpkit.launch.store_value import MAX_VALUE_BYTES, NotOurs, parse_object

SCHEME = "ddpk://"
TOKEN_ENV = "DDPKIT_JOIN_TOKEN"  # where `ddpkit join` finds the token when none is given
_TOKEN = re.compile(
    r"ddpk://(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<v4>[0-9.]+)):(?P<port>\d{1,5})"
    r"/(?P<run>[a-z0-9]{4,32})/(?P<secret>[A-Za-z0-9_-]{16,128})"
)
_ENDPOINT = re.compile(r"ddpk://(?:\[[0-9A-Fa-f:.]+\]|[0-9.]+):\d{1,5}(?=/)")


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
        raise ConfigError("bad-token", f"the token given ({_redacted(value)}) is not a ddpkit join "
                          f"token: {why}",
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
    """What an error may show of a rejected token: never any part of its run id or secret, only
    the address when it is one (``ddpk://10.0.0.2:29400/…``), else how long the text was."""
    match = _ENDPOINT.match(text)
    if match:
        return f"{match.group(0)}/…"
    return f"<{len(text)} characters>"


_FORMAT = 2  # the sealed envelope's version


def _aead(token: JoinToken) -> ChaCha20Poly1305:
    """The job's AEAD key: HKDF-SHA256 of the token's secret, salted with its run id."""
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=token.run_id.encode(),
               info=b"ddpkit join-store v2").derive(token.secret.encode())
    return ChaCha20Poly1305(key)


def seal(token: JoinToken, key: str, body: Mapping[str, Any]) -> bytes:
    """The stored bytes for ``body`` under ``key``: JSON encrypted and authenticated with the
    token's key (ChaCha20-Poly1305), bound to the full store key (run id included) as associated
    data, so it reads as noise without the secret and cannot be replayed under another key or run."""
    text = json.dumps(dict(body), sort_keys=True, separators=(",", ":")).encode()
    nonce = os.urandom(12)
    sealed = _aead(token).encrypt(nonce, text, token.key(key).encode())
    return json.dumps({"v": _FORMAT, "n": base64.b64encode(nonce).decode(),
                       "c": base64.b64encode(sealed).decode()}).encode()


def unseal(token: JoinToken, key: str, raw: bytes) -> dict[str, Any]:
    """The body of a sealed value; :class:`~ddpkit.launch.store_value.NotOurs` (and nothing else)
    when it was not sealed with this token's secret under this key and run, or is not ddpkit's
    sealed JSON at all (too large, too deep, not JSON, not an envelope): what it says never
    includes the run id or the secret."""
    envelope = parse_object(raw)
    try:
        if envelope.get("v") != _FORMAT:
            raise TypeError("not a sealed ddpkit value")
        nonce = base64.b64decode(envelope["n"], validate=True)
        sealed = base64.b64decode(envelope["c"], validate=True)
        if len(nonce) != 12 or len(sealed) > MAX_VALUE_BYTES:
            raise ValueError("bad nonce")
    except (ValueError, TypeError, KeyError, binascii.Error) as exc:
        raise NotOurs(f"it is not ddpkit's sealed JSON ({type(exc).__name__})") from None
    try:
        text = _aead(token).decrypt(nonce, sealed, token.key(key).encode())
    except InvalidTag:
        raise Unopened("it was not sealed with this token's secret for this key") from None
    return parse_object(text)


class Unopened(NotOurs):
    """A well-formed sealed value that does not open with this token: another secret (an old or
    mistyped token) or a forgery; the only case where blaming the token is plausible."""
