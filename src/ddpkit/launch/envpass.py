"""Which environment travels to the other nodes: an explicit allow-list, never the whole env.

From the launching shell only variables the engines read are passed on: ``NCCL_*``, ``GLOO_*``,
``TORCH_*``, ``PYTHON*``, ``CUDA_VISIBLE_DEVICES`` and ``OMP_NUM_THREADS``. On top of them come a
``.ddpkit_env`` file (``KEY=VALUE`` lines, any names: the user wrote them down on purpose) and then
``--env K=V`` flags. Anything else (tokens, credentials, ``PATH``, ``HOME``) stays on this machine.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpkit.errors import ConfigError

ALLOWED_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "PYTHON")
ALLOWED_NAMES = frozenset({"CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS"})
ENV_FILE_NAME = ".ddpkit_env"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_allowed(name: str) -> bool:
    """True for the names the allow-list passes on from the launching shell."""
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


@dataclass(frozen=True)
class PassedEnv:
    """The environment for the other nodes, and where each value came from."""

    values: Mapping[str, str] = field(default_factory=dict)  # allow-list + file (remote base env)
    overrides: tuple[tuple[str, str], ...] = ()  # --env K=V, applied last by each node
    sources: Mapping[str, str] = field(default_factory=dict)  # name -> "environment" | file path

    def to_dict(self) -> dict[str, Any]:
        return {
            "values": dict(sorted(self.values.items())),
            "overrides": [f"{k}={v}" for k, v in self.overrides],
            "sources": dict(sorted(self.sources.items())),
        }


def passed_env(env: Mapping[str, str], *, file_values: Mapping[str, str] | None = None,
               file_path: str | None = None,
               overrides: Sequence[tuple[str, str]] = ()) -> PassedEnv:
    """The allow-listed part of ``env``, then the env file's values, then ``overrides``."""
    values: dict[str, str] = {}
    sources: dict[str, str] = {}
    for key in sorted(env):
        if is_allowed(key) and _NAME.fullmatch(key):
            values[key] = env[key]
            sources[key] = "environment"
    for key, value in (file_values or {}).items():
        values[key] = value
        sources[key] = file_path or ENV_FILE_NAME
    return PassedEnv(values=values, overrides=tuple(overrides), sources=sources)


def parse_env_file(text: str, path: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (``export`` allowed, ``#`` comments, one level of matching quotes, no
    expansion); ConfigError ``bad-env-file`` naming ``path:line``."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not _NAME.fullmatch(key):
            raise ConfigError(
                "bad-env-file",
                f"{path}:{number}: {raw.strip()!r} is not KEY=VALUE",
                "write one `KEY=VALUE` per line (values may be quoted; `#` starts a comment line)",
                details={"path": path, "line": number},
            )
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key] = value
    return values


def load_env_file(path: Path, *, required: bool) -> dict[str, str] | None:
    """The parsed file, or None when it is absent and not ``required``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            raise ConfigError("env-file-not-found", f"env file {path} does not exist",
                              "check the path given to --env-file") from None
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("env-file-unreadable", f"cannot read env file {path}: {exc}",
                          "check the file's permissions") from None
    return parse_env_file(text, str(path))
