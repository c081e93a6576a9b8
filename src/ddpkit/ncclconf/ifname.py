"""``NCCL_SOCKET_IFNAME`` exactly as NCCL reads it: parse a spec, match interface names against it.

NCCL's rules (``ncclFindInterfaces`` / ``findInterfaces`` / ``parseStringList`` in NCCL's
``socket.cc`` and ``utils.cc``):

- a value of one character (or none) is ignored: NCCL then picks interfaces automatically;
- a leading ``^`` makes the list an exclude list; after it, a leading ``=`` makes every token an
  exact name (so ``^=docker0`` excludes exactly ``docker0``; ``=^docker0`` is the exact name
  ``^docker0``);
- the rest is split on ``,``; empty tokens are dropped; a ``:`` ends a token (the port part is
  for IB devices and does not restrict sockets);
- nothing is trimmed: ``eth0, eth1`` has the token `` eth1`` (leading space), which matches nothing;
- a token without ``=`` is a *prefix*: ``eth1`` also matches ``eth10`` and ``eth1.100``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MAX_TOKENS = 16  # NCCL's MAX_IFS: tokens past this are not parsed


@dataclass(frozen=True)
class IfnameSpec:
    exclude: bool
    exact: bool
    prefixes: tuple[str, ...]

    def token_matches(self, token: str, name: str) -> bool:
        return name == token if self.exact else name.startswith(token)

    def matches(self, name: str) -> bool:
        """Whether NCCL would consider interface ``name`` (before its address/state checks)."""
        listed = any(self.token_matches(token, name) for token in self.prefixes)
        return listed != self.exclude

    def to_text(self) -> str:
        return ("^" if self.exclude else "") + ("=" if self.exact else "") + ",".join(self.prefixes)


def parse_ifname(value: str) -> IfnameSpec | None:
    """The spec NCCL reads from ``value``, or None when NCCL ignores it (one character or empty)."""
    if len(value) <= 1:
        return None
    rest = value
    exclude = rest.startswith("^")
    if exclude:
        rest = rest[1:]
    exact = rest.startswith("=")
    if exact:
        rest = rest[1:]
    tokens: list[str] = []
    for raw in rest.split(","):
        token = raw.split(":", 1)[0]
        if token:
            tokens.append(token)
        if len(tokens) == MAX_TOKENS:
            break
    return IfnameSpec(exclude=exclude, exact=exact, prefixes=tuple(tokens))


def matching_interfaces(value: str, names: Sequence[str]) -> tuple[str, ...]:
    """The names in ``names`` that ``NCCL_SOCKET_IFNAME=value`` selects, sorted.

    Empty when NCCL ignores the value (it then chooses on its own; see :func:`parse_ifname`).
    """
    spec = parse_ifname(value)
    if spec is None:
        return ()
    return tuple(sorted({name for name in names if spec.matches(name)}))


def overmatched(value: str, names: Sequence[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Prefix tokens that name one interface exactly but also select others (``eth1`` -> eth10).

    Returns ``((token, (other names...)), ...)`` in token order; empty for ``=`` specs and exclude
    lists (excluding more than meant never selects a wrong interface on its own).
    """
    spec = parse_ifname(value)
    if spec is None or spec.exact or spec.exclude:
        return ()
    present = set(names)
    found: list[tuple[str, tuple[str, ...]]] = []
    for token in spec.prefixes:
        if token not in present:
            continue
        others = tuple(sorted(n for n in present if n != token and n.startswith(token)))
        if others:
            found.append((token, others))
    return tuple(found)


def padded_tokens(value: str) -> tuple[str, ...]:
    """Tokens with spaces or tabs in them, which NCCL keeps (so they match no interface)."""
    spec = parse_ifname(value)
    if spec is None:
        return ()
    return tuple(t for t in spec.prefixes if t != t.strip() or " " in t or "\t" in t)


def exact_spec(ifname: str) -> str:
    """The value that selects exactly ``ifname`` and nothing else: ``=eth1``."""
    return f"={ifname}"
