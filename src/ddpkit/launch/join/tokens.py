"""Join tokens (``ddpk://ADDR:PORT/<run-id>/<secret>``) and the sealed JSON the job store holds.

The job store is torch's own c10d ``TCPStore``, which has no authentication: anyone who reaches it
can read or write its keys. Every value ddpkit puts there is therefore sealed: JSON encrypted and
authenticated (ChaCha20-Poly1305 from ``cryptography``) with a key derived from the token's secret
(HKDF-SHA256, salted with the run id), with the full store key as associated data. Without the
secret a value is noise; a forged, altered or moved value fails to open, and a node acts only on
values that open. The secret itself never enters the store. Values are JSON, nothing else.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddpkit.errors import ConfigError
from ddpkit.i18n import _
from ddpkit.launch.sealed import Sealer, Unopened
from ddpkit.net.ports import is_tcp_port

__all__ = ["JoinToken", "Unopened", "new_token", "parse_token", "seal", "sealer", "unseal"]

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
        why = _("it does not start with ddpk://") if not value.startswith(SCHEME) else \
            _("it is not ddpk://ADDRESS:PORT/RUN-ID/SECRET (was it cut off when copied?)")
        raise ConfigError("bad-token", _("the token given ({token}) is not a ddpkit join token: "
                                         "{why}", token=_redacted(value), why=why),
                          _("copy the whole `ddpkit join ddpk://...` line the master printed"))
    address = match.group("v6") or match.group("v4")
    try:
        address = ipaddress.ip_address(address).compressed
    except ValueError:
        raise ConfigError("bad-token", _("the token's address {address!r} is not an IP address",
                                         address=address),
                          _("copy the whole line the master printed")) from None
    port = int(match.group("port"))
    if not is_tcp_port(port):
        raise ConfigError("bad-token", _("the token's port {port} is not a TCP port", port=port),
                          _("copy the whole line the master printed"))
    return JoinToken(address=address, port=port, run_id=match.group("run"),
                     secret=match.group("secret"))


def _redacted(text: str) -> str:
    """What an error may show of a rejected token: never any part of its run id or secret, only
    the address when it is one (``ddpk://10.0.0.2:29400/…``), else how long the text was."""
    match = _ENDPOINT.match(text)
    if match:
        return f"{match.group(0)}/…"
    return _("<{count} characters>", count=len(text))


def sealer(token: JoinToken) -> Sealer:
    """The job's sealer: HKDF-SHA256 of the token's secret, salted with its run id."""
    return Sealer(token.secret, token.run_id)


def seal(token: JoinToken, key: str, body: Mapping[str, Any]) -> bytes:
    """The stored bytes for ``body`` under ``key`` (:mod:`ddpkit.launch.sealed`), bound to the
    full store key (run id included), so it reads as noise without the secret and cannot be
    replayed under another key or run."""
    return sealer(token).seal(token.key(key), body)


def unseal(token: JoinToken, key: str, raw: bytes) -> dict[str, Any]:
    """The body of a sealed value; :class:`~ddpkit.launch.store_value.NotOurs` (and nothing else,
    :class:`~ddpkit.launch.sealed.Unopened` for a sealed value that does not open with this token)
    when it is not this run's value under this key; what it says never includes the run id or
    the secret."""
    return sealer(token).unseal(token.key(key), raw)
