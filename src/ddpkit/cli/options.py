"""Flag helpers shared by the subcommands: kebab-case canonical names, torchrun spellings too."""

from __future__ import annotations

import argparse
from typing import Any

from ddpkit.i18n import _


def add_flag(parser: argparse._ActionsContainer, name: str, *more: str, **kwargs: Any) -> None:
    """Add ``--kebab-name`` and also accept ``--kebab_name`` (torchrun's spelling), hidden from help."""
    spellings = [name, *more]
    extra = []
    for spelling in spellings:
        if spelling.startswith("--") and "-" in spelling[2:]:
            underscored = "--" + spelling[2:].replace("-", "_")
            if underscored not in spellings:
                extra.append(underscored)
    action = parser.add_argument(*spellings, **kwargs)
    if extra:
        hidden = {k: v for k, v in kwargs.items() if k not in ("help", "required", "dest")}
        parser.add_argument(*extra, dest=action.dest, help=argparse.SUPPRESS, **hidden)


def add_verbosity_flags(parser: argparse.ArgumentParser) -> None:
    """-v/--verbose and -q/--quiet, the same on every command that runs torch."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-v", "--verbose", action="store_true",
                       help=_("also show torch's own C++ log lines as torch prints them (all of "
                              "them are in the run directory's torchrun.log either way)"))
    group.add_argument("-q", "--quiet", action="store_true",
                       help=_("show only results and errors (and the job's own output)"))


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help=_("print one versioned JSON document on stdout (logs stay on stderr)"),
    )
