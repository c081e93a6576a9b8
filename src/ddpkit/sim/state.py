"""The state file of a cluster: its spec and how far ``up`` got (written before each phase).

``/run/ddpkit-sim/<name>/state.json`` lives on tmpfs, like the namespaces themselves, so a reboot
forgets both together. ``down`` does not need it (names are derived), ``up`` and ``status`` do.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ddpkit.atomic_file import replace_file
from ddpkit.errors import ConfigError, DeadlineExceeded
from ddpkit.i18n import _
from ddpkit.sim.spec import SimSpec
from ddpkit.sim.topology import RUNTIME_ROOT, runtime_dir

STATE_SCHEMA = "ddpkit.sim-state/1"
PHASE_BUILDING = "building"
PHASE_UP = "up"
LOCK_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ClusterState:
    spec: SimSpec
    phase: str  # "building" until every step of up has run, then "up"
    steps_done: int


def state_path(name: str) -> str:
    return f"{runtime_dir(name)}/state.json"


def write_state(state: ClusterState) -> None:
    """Atomically replace the state file (a reader sees the old or the new one, never half)."""
    path = state_path(state.spec.name)
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o755, exist_ok=True)
    doc: dict[str, Any] = {
        "schema": STATE_SCHEMA,
        "spec": state.spec.to_dict(),
        "phase": state.phase,
        "steps_done": state.steps_done,
    }
    replace_file(path, json.dumps(doc, indent=2) + "\n")


def read_state(name: str) -> ClusterState | None:
    """The recorded state of cluster ``name``, or None when it has no state file."""
    path = state_path(name)
    try:
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
        if doc.get("schema") != STATE_SCHEMA:
            raise ValueError(f"schema {doc.get('schema')!r}")
        return ClusterState(
            spec=SimSpec.from_dict(doc["spec"]),
            phase=str(doc["phase"]),
            steps_done=int(doc["steps_done"]),
        )
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError, ConfigError) as exc:
        raise ConfigError(
            "sim-state-unreadable",
            _("the state file {path} of sim cluster {name} is unreadable ({reason})",
              path=str(path), name=name, reason=str(exc)),
            _("remove the cluster with `ddpkit sim down --name {name}` (it does not need the "
              "file)", name=name),
        ) from None


@contextlib.contextmanager
def sim_lock() -> Iterator[None]:
    """One sim up/down at a time on this machine (they are quick; clusters share host state)."""
    os.makedirs(RUNTIME_ROOT, mode=0o755, exist_ok=True)
    fd = os.open(RUNTIME_ROOT, os.O_RDONLY | os.O_DIRECTORY)
    try:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise DeadlineExceeded(
                        "sim-busy",
                        _("another ddpkit sim up/down held {path} for {seconds:.0f}s",
                          path=str(RUNTIME_ROOT), seconds=LOCK_TIMEOUT_S),
                        _("wait for it to finish (see `ps -ef | grep 'ddpkit sim'`), then retry"),
                    ) from None
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)
