"""torchrun, with the store of its static rendezvous listening on the master address only.

torch's static rendezvous (``torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py``)
starts its ``TCPStore`` server with no listening socket of its own, and such a server binds every
interface (``*:PORT``); neither torchrun nor an environment variable names an address to bind.
``TCPStore`` itself takes a socket already bound and listening (``master_listen_fd``), so this
program binds one to ``--bind ADDRESS`` and has the static rendezvous hand it to its store, then
runs torchrun's own ``main`` with the remaining arguments: torch's rendezvous, unchanged, on one
address. On node 0 ``ddpkit launch`` runs torchrun as
``python -m ddpkit.launch.torchrun.bound --bind ADDRESS -- TORCHRUN_ARGS...``.

If the address cannot be bound (it is not this machine's), torchrun runs as it would have, on
every interface, after one line on stderr saying so.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from ddpkit.i18n import _
from ddpkit.launch.store_client import listening_fd

MODULE = "ddpkit.launch.torchrun.bound"


def bound_factory(original: Callable[..., Any], address: str, port: int,
                  bind: Callable[[str, int], int] = listening_fd) -> Callable[..., Any]:
    """``original`` (TCPStore), but the server side for ``port`` listens on ``address`` only."""

    def store(host: str, store_port: int, *args: Any, **kwargs: Any) -> Any:
        is_master = args[1] if len(args) > 1 else kwargs.get("is_master", False)
        if is_master and store_port == port and "master_listen_fd" not in kwargs:
            kwargs["master_listen_fd"] = bind(address, port)
        return original(host, store_port, *args, **kwargs)

    return store


def split_argv(argv: Sequence[str]) -> tuple[str, list[str]]:
    """``--bind ADDRESS -- TORCHRUN_ARGS...`` -> (address, torchrun's arguments)."""
    args = list(argv)
    if len(args) < 3 or args[0] != "--bind" or args[2] != "--":
        raise SystemExit("usage: python -m ddpkit.launch.torchrun.bound --bind ADDRESS -- ARGS...")
    return args[1], args[3:]


def _master_port(args: Sequence[str]) -> int | None:
    for arg in args:
        if arg.startswith("--master-port=") or arg.startswith("--master_port="):
            return int(arg.split("=", 1)[1])
    return None


def main(argv: Sequence[str] | None = None) -> None:
    address, args = split_argv(sys.argv[1:] if argv is None else argv)
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.rendezvous import static_tcp_rendezvous as static

    port = _master_port(args)
    if port is not None:
        try:
            listening_fd_check(address)
            static.TCPStore = bound_factory(  # type: ignore[attr-defined,assignment]
                static.TCPStore, address, port)  # type: ignore[attr-defined]
        except OSError as exc:
            print(_("ddpkit: torchrun's store listens on every interface: cannot listen on "
                    "{address} ({error})", address=address, error=exc.strerror or str(exc)),
                  file=sys.stderr, flush=True)
    sys.argv = ["torchrun", *args]
    torchrun.main()


def listening_fd_check(address: str) -> None:
    """OSError when ``address`` is not one this machine can listen on (port 0: any free port)."""
    import os

    os.close(listening_fd(address, 0))


if __name__ == "__main__":
    main()
