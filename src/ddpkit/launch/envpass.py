"""Which environment travels to the other nodes: an explicit allow-list, never the whole env.

From the launching shell only variables the engines read are passed on: ``NCCL_*``, ``GLOO_*``,
``TORCH_*``, ``PYTHON*``, ``CUDA_VISIBLE_DEVICES`` and ``OMP_NUM_THREADS``. On top of them come a
``.ddpkit_env`` file (``KEY=VALUE`` lines, any names: the user wrote them down on purpose; a
``PREFIX*`` line forwards this shell's variables of that family, e.g. ``ACCELERATE_*``) and then
``--env K=V`` flags. Anything else (tokens, credentials, ``PATH``, ``HOME``) stays on this machine;
what of it frameworks read (``ACCELERATE_*``, ``HF_*``, ``WANDB_*``...) is named in one warning
before the job starts (:func:`untravelled_warning`): a node that runs without it takes another
code path, and the job then fails on a consequence nobody can trace back.

What travels never rides in a command line (``ps`` shows those on both ends of ssh for the whole
job): the supervisor writes it as one JSON line on the node's stdin (:func:`to_wire`), which the
node reads (:func:`read_wire`) before its stdin becomes the lifeline. Whatever ddpkit prints shows a
value whose name looks secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``...) masked
(:func:`shown`).
"""

from __future__ import annotations

import json
import os
import re
import select
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpkit.errors import ConfigError
from ddpkit.file_safety import NotRegularFile, read_regular
from ddpkit.i18n import _
from ddpkit.wording import clauses, either, some

ALLOWED_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "PYTHON")
ALLOWED_NAMES = frozenset({"CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS"})
ENV_FILE_NAME = ".ddpkit_env"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
MASK = "<hidden>"
MAX_WIRE_BYTES = 1 << 20
MAX_ENV_FILE_BYTES = 1 << 20
WIRE_TIMEOUT_S = 30.0


def looks_secret(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def shown(name: str, value: str) -> str:
    """``value`` as ddpkit may print it: masked when ``name`` looks like a secret's."""
    return MASK if looks_secret(name) else value


def shown_env(env: Mapping[str, str]) -> dict[str, str]:
    return {key: shown(key, value) for key, value in sorted(env.items())}


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
            "values": shown_env(self.values),
            "overrides": [f"{k}={shown(k, v)}" for k, v in self.overrides],
            "sources": dict(sorted(self.sources.items())),
        }


def to_wire(passed: PassedEnv) -> bytes:
    """The one JSON line a supervised node reads from its stdin first."""
    return json.dumps({"values": dict(passed.values),
                       "overrides": [list(pair) for pair in passed.overrides]}).encode() + b"\n"


def read_wire(fd: int, timeout: float = WIRE_TIMEOUT_S) -> tuple[dict[str, str],
                                                                   tuple[tuple[str, str], ...]]:
    """(values, overrides) from the JSON line on ``fd``, read with ``os.read`` up to its newline
    (nothing after it is consumed); ConfigError ``bad-env-wire`` when it is missing or malformed."""
    data = b""
    deadline = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or len(data) > MAX_WIRE_BYTES or not select.select([fd], [], [], left)[0]:
            raise _bad_wire(_("no complete environment line arrived on stdin"))
        chunk = os.read(fd, 1)
        if not chunk:
            raise _bad_wire(_("stdin ended before the environment line"))
        data += chunk
    try:
        doc = json.loads(data)
        values = {str(k): str(v) for k, v in dict(doc["values"]).items()}
        overrides = tuple((str(k), str(v)) for k, v in doc["overrides"])
    except (ValueError, KeyError, TypeError) as exc:
        raise _bad_wire(_("the environment line is not ddpkit's JSON ({error})",
                           error=str(exc))) from None
    for name in (*values, *(k for k, _value in overrides)):
        if not _NAME.fullmatch(name):
            raise _bad_wire(_("{name!r} is not an environment variable name", name=name))
    return values, overrides


def _bad_wire(why: str) -> ConfigError:
    return ConfigError("bad-env-wire", _("--env-stdin: {why}", why=why),
                       _("--env-stdin is for ddpkit's own supervisor (--hosts); run the same "
                         "ddpkit version on every host"))


@dataclass(frozen=True)
class EnvFile:
    """A parsed ``.ddpkit_env``: its ``KEY=VALUE`` lines, and its ``PREFIX*`` lines (families of
    this shell's variables to forward, e.g. ``ACCELERATE_``)."""

    values: Mapping[str, str] = field(default_factory=dict)
    prefixes: tuple[str, ...] = ()


def passed_env(env: Mapping[str, str], *, file_values: Mapping[str, str] | None = None,
               file_path: str | None = None, file_prefixes: Sequence[str] = (),
               overrides: Sequence[tuple[str, str]] = ()) -> PassedEnv:
    """The allow-listed part of ``env`` and the families the env file names (``file_prefixes``),
    then the env file's values, then ``overrides``."""
    values: dict[str, str] = {}
    sources: dict[str, str] = {}
    for key in sorted(env):
        if not _NAME.fullmatch(key):
            continue
        if is_allowed(key):
            values[key] = env[key]
            sources[key] = "environment"
        elif key.startswith(tuple(file_prefixes)) and file_prefixes:
            family = next(p for p in file_prefixes if key.startswith(p))
            values[key] = env[key]
            sources[key] = f"environment, {family}* in {file_path or ENV_FILE_NAME}"
    for key, value in (file_values or {}).items():
        values[key] = value
        sources[key] = file_path or ENV_FILE_NAME
    return PassedEnv(values=values, overrides=tuple(overrides), sources=sources)


def parse_env_file(text: str, path: str) -> EnvFile:
    """``KEY=VALUE`` lines (``export`` allowed, ``#`` comments, one level of matching quotes, no
    expansion) and ``PREFIX*`` lines; ConfigError ``bad-env-file`` naming ``path:line``."""
    values: dict[str, str] = {}
    prefixes: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        if line.endswith("*") and "=" not in line and _NAME.fullmatch(line[:-1]):
            prefixes.append(line[:-1])
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not _NAME.fullmatch(key):
            raise ConfigError(
                "bad-env-file",
                _("{path}:{line}: {text!r} is not KEY=VALUE", path=path, line=number,
                  text=raw.strip()),
                _("write one `KEY=VALUE` per line (values may be quoted; `#` starts a comment "
                  "line), or `PREFIX*` to forward this shell's variables of a family"),
                details={"path": path, "line": number},
            )
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key] = value
    return EnvFile(values, tuple(dict.fromkeys(prefixes)))


def load_env_file(path: Path, *, required: bool) -> EnvFile | None:
    """The parsed file, or None when it is absent and not ``required``. A FIFO or a device is
    refused at once (reading one would wait for a writer until Ctrl-C)."""
    try:
        data = read_regular(path, MAX_ENV_FILE_BYTES + 1)
        if len(data) > MAX_ENV_FILE_BYTES:
            raise ConfigError("env-file-unreadable", _("env file {path} is larger than {limit} bytes",
                                                      path=str(path), limit=MAX_ENV_FILE_BYTES),
                              _("keep KEY=VALUE lines only in it"))
        text = data.decode("utf-8")
    except NotRegularFile as exc:
        raise ConfigError("env-file-unreadable", _("cannot read env file {why}",
                                                    why=str(exc.strerror)),
                          _("make {path} a regular file of KEY=VALUE lines (or remove it; "
                            "--env KEY=VALUE passes one value)", path=str(path))) from None
    except FileNotFoundError:
        if required:
            raise ConfigError("env-file-not-found", _("env file {path} does not exist",
                                                     path=str(path)),
                              _("check the path given to --env-file")) from None
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("env-file-unreadable", _("cannot read env file {path}: {error}",
                                                    path=str(path),
                                                    error=str(getattr(exc, "strerror", None)
                                                              or exc)),
                          _("check the file's permissions")) from None
    return parse_env_file(text, str(path))


# Families of variables that training frameworks read as configuration (accelerate's
# ACCELERATE_USE_CPU/ACCELERATE_MIXED_PRECISION and its FSDP_* plugin settings, Hugging Face's
# HF_*/TRANSFORMERS_*/DATASETS_*/TOKENIZERS_*, DeepSpeed's, Lightning's PL_*/LIGHTNING_*, the
# experiment trackers'): set on this machine only, they change what one node's ranks do.
FRAMEWORK_PREFIXES = ("ACCELERATE_", "FSDP_", "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "DATASETS_",
                      "TOKENIZERS_", "DEEPSPEED_", "PL_", "LIGHTNING_", "WANDB_", "MLFLOW_",
                      "COMET_", "NEPTUNE_", "TENSORBOARD_")
# Launch variables: per node or per rank by nature, never sent (torchrun sets its own on every
# node; NODE_RANK, read by some frameworks' launchers, is this node's only).
LAUNCH_NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
                "MASTER_ADDR", "MASTER_PORT")
# Every machine's shell has its own (a script reading HOME or PATH reads the node's own value).
MACHINE_NAMES = frozenset({"HOME", "PATH", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "LANG",
                           "LANGUAGE", "TERM", "TMPDIR", "HOSTNAME", "LD_LIBRARY_PATH",
                           "CUDA_HOME", "VIRTUAL_ENV", "CONDA_PREFIX", "DISPLAY"})
MACHINE_PREFIXES = ("LC_", "XDG_", "SSH_", "SLURM_")
SHOWN_NAMES = 8  # names listed in the warning; the rest are counted


@dataclass(frozen=True)
class Untravelled:
    """What is set on this machine and will not reach the other nodes, of what frameworks read."""

    framework: tuple[str, ...] = ()  # framework configuration, not sent
    launch: tuple[str, ...] = ()  # launch variables set here (never sent)
    script: tuple[str, ...] = ()  # what the script reads by name, set here, not sent

    def families(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for name in self.framework for p in FRAMEWORK_PREFIXES
                                   if name.startswith(p)))


def untravelled(env: Mapping[str, str], passed: PassedEnv,
                script_reads: Sequence[str] = ()) -> Untravelled:
    """The names in ``env`` (this machine's) that frameworks or launchers read, or the script
    itself (``script_reads``: ``entry_file.environment_names``), and that ``passed`` does not
    send (allow-list, env file, its families, ``--env``)."""
    sent = set(passed.values) | {key for key, _ in passed.overrides}
    framework = tuple(sorted(k for k in env if k.startswith(FRAMEWORK_PREFIXES) and k not in sent))
    launch = tuple(k for k in LAUNCH_NAMES if k in env and k not in sent)
    script = tuple(k for k in script_reads if k in env and k not in sent
                   and k not in framework and k not in LAUNCH_NAMES and k not in MACHINE_NAMES
                   and not k.startswith(MACHINE_PREFIXES))
    return Untravelled(framework, launch, script)


def untravelled_warning(found: Untravelled, env_file: str = ENV_FILE_NAME) -> str | None:
    """One warning naming every such variable and the fix; None when there is none."""
    framework = launch = script = None
    if found.script:
        script = _(
            "set here, read by the script, but not sent to the other nodes: {names} (their ranks "
            "run without them); send them with --env NAME=VALUE or a `NAME=VALUE` line in "
            "{env_file}", names=some(found.script, SHOWN_NAMES), env_file=env_file)
    if found.framework:
        framework = _(
            "set here but not sent to the other nodes: {names} (frameworks read them: a node "
            "without them may take another code path); send them with --env NAME=VALUE or a line "
            "in {env_file}: `NAME=VALUE`, or {families} for the whole family",
            names=some(found.framework, SHOWN_NAMES), env_file=env_file,
            families=either([f"`{p}*`" for p in found.families()]))
    if found.launch:
        launch = _(
            "{names} set here: launch variables are never sent (every node's torchrun sets RANK, "
            "LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT for its ranks; NODE_RANK would "
            "be wrong on the others)", names=", ".join(found.launch))
    parts = [part for part in (script, framework, launch) if part]
    return clauses(parts) if parts else None
