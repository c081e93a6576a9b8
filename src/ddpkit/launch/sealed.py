"""Sealed JSON values for stores anyone on the network can reach: one scheme for every store.

A value is JSON encrypted and authenticated with ChaCha20-Poly1305 (the ``cryptography``
library) under a key derived with HKDF-SHA256 from a secret the job's nodes share (salted with a
public id, the run id), with the value's full store key as associated data: without the secret it
reads as noise, and a forged, altered, or moved value (another key, another run) does not open.
Used by the join store (:mod:`ddpkit.launch.join.tokens`, the token's secret), the hang watch's
progress exchange and the cluster doctor's store. Parsing goes through
:func:`ddpkit.launch.store_value.parse_json_dict` (bounded), and every failure is
:class:`~ddpkit.launch.store_value.NotOurs`.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Mapping
from typing import Any

from ddpkit.i18n import _
from ddpkit.launch.store_value import MAX_VALUE_BYTES, NotOurs, parse_json_dict

_FORMAT = 2  # the sealed envelope's version
JOIN_STORE = b"ddpkit join-store v2"  # HKDF info: one derived key per use of a secret


class Unopened(NotOurs):
    """A well-formed sealed value that does not open with this key: another secret (an old or
    mistyped token) or a forgery; the only case where blaming the secret is plausible."""


class Sealer:
    """Seals and opens values with the key derived from ``secret`` (salt ``salt``, HKDF info
    ``purpose``: the same secret gives unrelated keys for unrelated uses)."""

    def __init__(self, secret: str, salt: str, purpose: bytes = JOIN_STORE) -> None:
        # imported here: every launch imports this module (the hang watch), few seal anything,
        # and cryptography's bindings cost a launch's start ~20 ms of CPU
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt.encode(),
                   info=purpose).derive(secret.encode())
        self._aead = ChaCha20Poly1305(key)

    def seal(self, key: str, body: Mapping[str, Any]) -> bytes:
        text = json.dumps(dict(body), sort_keys=True, separators=(",", ":")).encode()
        nonce = os.urandom(12)
        sealed = self._aead.encrypt(nonce, text, key.encode())
        return json.dumps({"v": _FORMAT, "n": base64.b64encode(nonce).decode(),
                           "c": base64.b64encode(sealed).decode()}).encode()

    def unseal(self, key: str, raw: object) -> dict[str, Any]:
        """The body under store key ``key``; NotOurs (Unopened: sealed, not with this key)."""
        envelope = parse_json_dict(raw)
        try:
            if envelope.get("v") != _FORMAT:
                raise TypeError("not a sealed ddpkit value")
            nonce = base64.b64decode(envelope["n"], validate=True)
            sealed = base64.b64decode(envelope["c"], validate=True)
            if len(nonce) != 12 or len(sealed) > MAX_VALUE_BYTES:
                raise ValueError("bad nonce")
        except (ValueError, TypeError, KeyError, binascii.Error) as exc:
            raise NotOurs(_("it is not ddpkit's sealed JSON ({kind})",
                            kind=type(exc).__name__)) from None
        from cryptography.exceptions import InvalidTag

        try:
            text = self._aead.decrypt(nonce, sealed, key.encode())
        except InvalidTag:
            raise Unopened(_("it was not sealed with this job's secret for this key")) from None
        return parse_json_dict(text)
