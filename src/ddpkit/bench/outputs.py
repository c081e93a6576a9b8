"""The files a bench's node 0 writes besides its run directory: ``--out`` (the ``ddpkit.bench/1``
document), ``--csv`` and ``--plot``; each checked before the run starts and written whole."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ddpkit.atomic_file import replace_file
from ddpkit.errors import EnvironmentProblem
from ddpkit.i18n import _


def check_outputs(out: str | None, csv: str | None, plot: str | None) -> None:
    """EnvironmentProblem ``output-unwritable`` for a path that cannot be written, and
    ``matplotlib-missing`` for a plot without matplotlib: before anything starts."""
    for path, flag in ((out, "--out"), (csv, "--csv"), (plot, "--plot")):
        if path is None:
            continue
        parent = Path(path).parent
        if not parent.is_dir() or not os.access(parent, os.W_OK) or Path(path).is_dir():
            raise EnvironmentProblem("output-unwritable",
                                     _("{flag} {path}: cannot write there", flag=flag, path=path),
                                     _("pass a file in an existing, writable directory"))
    if plot:
        from ddpkit.bench.plot import require_matplotlib

        require_matplotlib()


def write_text(path: str | Path, text: str) -> None:
    try:
        replace_file(path, text)
    except OSError as exc:
        raise EnvironmentProblem("output-unwritable", _("cannot write {path}: {error}",
                                                        path=str(path), error=exc.strerror),
                                 _("pass a file in a writable directory")) from exc


def write_outputs(doc: dict[str, Any], *, out: str | None, csv: str | None, plot: str | None,
                  threshold: float | None) -> None:
    """``--out``, ``--csv`` and ``--plot`` from the bench document."""
    if out:
        write_text(out, json.dumps(doc, indent=2) + "\n")
    if csv:
        from ddpkit.bench.report import csv_text

        write_text(csv, csv_text(doc))
    if plot:
        from ddpkit.bench.plot import write_plot

        write_plot(doc, plot, threshold)
