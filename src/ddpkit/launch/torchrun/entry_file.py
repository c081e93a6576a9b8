"""Finding and reading the file an entry point runs (I/O), for :mod:`ddpkit.launch.torchrun.local_rank`.

Nothing is imported or run. A script path is read as given (relative to the working directory).
``-m pkg.mod`` is resolved with :class:`importlib.machinery.PathFinder` one package level at a
time over the working directory, ``PYTHONPATH`` and this interpreter's ``sys.path``: PathFinder
only looks at files, so no package's ``__init__`` is executed (``importlib.util.find_spec`` would
import the parents). Modules that only a custom import hook (a meta-path finder, as some
editable installs use) can find are not found: then nothing is read and the decision says so.
With ``--no-python`` the entry is an executable; it is read only if it is a Python script
(``.py``, or a ``python`` shebang).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Mapping, Sequence
from importlib.machinery import PathFinder
from pathlib import Path

from ddpkit.i18n import _
from ddpkit.launch.torchrun.local_rank import MAX_SOURCE_BYTES, EntrySource


def read_entry(entry: str, *, cwd: Path, is_module: bool = False, no_python: bool = False,
               env: Mapping[str, str] | None = None, sys_path: Sequence[str] = ()) -> EntrySource:
    env = env or {}
    if is_module:
        search = [str(cwd), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p],
                  *[p for p in sys_path if p]]
        found = find_module_file(entry, search)
        if found is None:
            return EntrySource(None, None, _("module {module} was not found as a Python source "
                                             "file on the working directory, PYTHONPATH or "
                                             "sys.path", module=entry))
        return read_source(found)
    path = cwd / entry
    if no_python and os.sep not in entry and not path.exists():
        located = shutil.which(entry, path=env.get("PATH"))
        if located is None:
            return EntrySource(entry, None, f"{entry} is not on PATH")
        path = Path(located)
    if path.is_dir() and (path / "__main__.py").is_file():
        path = path / "__main__.py"
    source = read_source(path, shown=entry if path == cwd / entry else str(path))
    if no_python and source.data is not None and not _is_python(path, source.data):
        return EntrySource(source.path, None, f"{source.path} is not a Python script (--no-python)")
    return source


def find_module_file(name: str, search: Sequence[str]) -> Path | None:
    """The source file ``python -m name`` runs, found without importing anything."""
    locations: Sequence[str] | None = list(search)
    parts = name.split(".")
    spec = None
    for depth in range(len(parts)):
        if locations is None:
            return None
        spec = PathFinder.find_spec(".".join(parts[: depth + 1]), list(locations))
        if spec is None:
            return None
        locations = spec.submodule_search_locations
    if spec is None:
        return None
    if spec.submodule_search_locations is not None:  # a package: -m runs its __main__
        main = PathFinder.find_spec(f"{name}.__main__", list(spec.submodule_search_locations))
        spec = main
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def read_source(path: Path, shown: str | None = None) -> EntrySource:
    """At most MAX_SOURCE_BYTES of ``path``; the problem in words when it cannot be read."""
    label = shown or str(path)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or a device would block or never end
            return EntrySource(label, None, f"{label} is not a regular file")
        with open(path, "rb") as handle:
            data = handle.read(MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        return EntrySource(label, None, _("cannot read {path}: {error}", path=label,
                                          error=str(exc.strerror or exc)))
    if len(data) > MAX_SOURCE_BYTES:
        return EntrySource(label, None, _("{path} is larger than {limit} MiB, so it was not read",
                                          path=label, limit=MAX_SOURCE_BYTES >> 20))
    return EntrySource(label, data)


def _is_python(path: Path, data: bytes) -> bool:
    if path.suffix == ".py":
        return True
    first = data.split(b"\n", 1)[0]
    return first.startswith(b"#!") and b"python" in first


# os.environ["N"], os.environ.get("N"...), os.getenv("N"...), environ.setdefault("N"...) and
# environ.pop("N"...), with either quote: the literal names a script reads from its environment
_ENV_READ = re.compile(r"""\b(?:environ\s*(?:\.\s*(?:get|setdefault|pop)\s*\()?\s*\[?|getenv\s*\()"""
                       r"""\s*['"]([A-Za-z_][A-Za-z0-9_]*)['"]""")


def environment_names(data: bytes) -> tuple[str, ...]:
    """The environment variables a script's source reads by a literal name, in order of first
    use (a name built at run time cannot be known from the source)."""
    text = data.decode("utf-8", errors="replace")
    return tuple(dict.fromkeys(m[1] for m in _ENV_READ.finditer(text)))
