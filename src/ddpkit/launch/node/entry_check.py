"""Is the entry point there? (I/O: the file system, nothing imported or run.)

Checked on every node before it waits for anything: a mistyped script path used to surface only
when the rendezvous timed out (601 s on the master), because torchrun starts no rank, and so
opens no file, before every node has met. The answer is a problem in words, or None; the plan
carries it (a warning in ``--dry-run``) and :func:`ddpkit.launch.node.session.execute` raises
``script-not-found`` with it before the preflight.

A script path is read as given, relative to the working directory (a directory with a
``__main__.py`` is runnable too). ``-m pkg.mod`` is looked up with
:func:`ddpkit.launch.torchrun.entry_file.find_module_file` over the working directory,
``PYTHONPATH`` and ``sys.path`` (no package is imported); when that does not find it, the top-level
package alone is asked of the import system (``importlib.util.find_spec`` of a top-level name
imports nothing, and it sees editable installs' import hooks): only a top-level name nobody can
find is a problem. With ``--no-python`` the entry is a program: a path, or a name on ``PATH``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from ddpkit.errors import ConfigError
from ddpkit.i18n import _
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.torchrun.entry_file import find_module_file


def entry_problem(entry: str, *, cwd: Path, is_module: bool = False, no_python: bool = False,
                  env: Mapping[str, str] | None = None,
                  sys_path: Sequence[str] = ()) -> str | None:
    """Why ``entry`` cannot be run here, in words; None when it can (as far as can be told)."""
    env = env or {}
    if is_module:
        return _module_problem(entry, cwd, env, sys_path)
    path = cwd / entry
    if no_python and os.sep not in entry and not path.exists():
        if shutil.which(entry, path=env.get("PATH")) is None:
            return f"{entry} is neither a file in {cwd} nor a program on PATH"
        return None
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return _("{entry} does not exist (looked in {cwd})", entry=entry, cwd=str(cwd))
    except OSError as exc:
        return _("cannot look at {entry}: {error}", entry=entry, error=str(exc.strerror or exc))
    if stat.S_ISDIR(mode):
        if no_python or (path / "__main__.py").is_file():
            return None if not no_python else _("{entry} is a directory, not a program",
                                                entry=entry)
        return _("{entry} is a directory without a __main__.py", entry=entry)
    if not stat.S_ISREG(mode):
        return _("{entry} is not a regular file", entry=entry)
    if not os.access(path, os.R_OK):
        return _("{entry} is not readable by this user", entry=entry)
    if no_python and not os.access(path, os.X_OK):
        return _("{entry} is not executable (--no-python runs it as a program)", entry=entry)
    return None


def _module_problem(name: str, cwd: Path, env: Mapping[str, str],
                    sys_path: Sequence[str]) -> str | None:
    search = [str(cwd), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p],
              *[p for p in sys_path if p]]
    if find_module_file(name, search) is not None:
        return None
    top = name.split(".", 1)[0]
    try:
        if importlib.util.find_spec(top) is not None:
            return None  # found by an import hook: the rest cannot be told without importing it
    except (ImportError, ValueError):
        pass
    return _("module {module} was not found (working directory {cwd}, PYTHONPATH, this python's "
             "sys.path)", module=top, cwd=str(cwd))


def config_entry_problem(config: LaunchConfig, env: Mapping[str, str], cwd: Path,
                         sys_path: Sequence[str]) -> str | None:
    """:func:`entry_problem` for a launch configuration's entry."""
    return entry_problem(config.entry, cwd=cwd, is_module=config.is_module,
                         no_python=config.has_torchrun_option("--no-python"), env=env,
                         sys_path=sys_path)


def entry_error(problem: str, *, entry: str, is_module: bool, node_rank: int) -> ConfigError:
    """``script-not-found``: this node cannot start its ranks, so it does not wait for the job."""
    return ConfigError(
        "script-not-found",
        _("node {node}: the module cannot be run here: {problem}", node=node_rank,
          problem=problem) if is_module else
        _("node {node}: the script cannot be run here: {problem}", node=node_rank,
          problem=problem),
        _("check the spelling and run from the directory that holds it, with the same path on "
          "every node (copy it there first; each node runs its own copy)"),
        details={"entry": entry, "node_rank": node_rank})
