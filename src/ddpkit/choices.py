"""Closed sets of strings (``Literal`` types) read back from text that is not typed: JSON, flags."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T", bound=str)


def parse_choice(value: object, allowed: Iterable[T], what: str) -> T:
    """``value`` as the member of ``allowed`` it equals; ValueError naming ``what`` otherwise."""
    options = tuple(allowed)
    for option in options:
        if value == option:
            return option
    raise ValueError(f"{what} {value!r} is not one of {', '.join(options)}")
