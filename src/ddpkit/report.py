"""Versioned JSON documents: every ``--json`` output is built here."""

from __future__ import annotations

from typing import Any

from ddpkit import __version__


def document(kind: str, version: int, payload: dict[str, Any]) -> dict[str, Any]:
    """A ``--json`` document: ``{"schema": "ddpkit.<kind>/<version>", "ddpkit": ..., **payload}``."""
    if "schema" in payload:
        raise ValueError("payload must not carry its own schema key")
    return {"schema": f"ddpkit.{kind}/{version}", "ddpkit_version": __version__, **payload}
