"""Every parser of ddpkit's command line, sub-commands included (for the help and zh tests)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator


def parsers(name: str, parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(``name`` and the sub-commands' names, parser) for ``parser`` and each parser below it."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from parsers(f"{name} {sub_name}", sub)
