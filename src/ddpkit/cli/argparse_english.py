"""argparse's own messages stay English: never looked up in a gettext catalogue.

argparse translates its messages ("usage: ", "unrecognized arguments: %s", ...) with the
``gettext`` module's global functions, in the ``messages`` domain, under the interpreter's
``share/locale``; the language comes from ``LANGUAGE`` (then ``LC_ALL``, ...), and gettext joins it
to that directory as it is: ``LANGUAGE=../../tmp/x`` loads ``/tmp/x/LC_MESSAGES/messages.mo`` on a
Python that has a ``share/locale`` directory, so whoever sets the variable chooses what ddpkit's
usage errors say. ddpkit ships no catalogue for argparse and reads argparse's English messages back
into its own translated templates (``command_table._argparse_message``), so argparse's lookups are
replaced by the identity: no path from the environment is ever opened for them.
"""

from __future__ import annotations

import argparse


def _english(message: str) -> str:
    return message


def _english_plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def keep_argparse_english() -> None:
    """Make argparse's message lookups the identity (idempotent; the CLI calls it first)."""
    setattr(argparse, "_", _english)  # noqa: B010 - argparse looks these globals up per message
    setattr(argparse, "ngettext", _english_plural)  # noqa: B010
