"""torchrun, with the store of its static rendezvous listening on the master address only.

torch's static rendezvous (``torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py``)
starts its ``TCPStore`` server with no listening socket of its own, and such a server binds every
interface (``*:PORT``); neither torchrun nor an environment variable names an address to bind.
``TCPStore`` itself takes a socket already bound and listening (``master_listen_fd``), so this
module binds one to the master address and has the static rendezvous hand it to its store:
torch's rendezvous, unchanged, on one address. On node 0 of a job of several, ``ddpkit launch``
runs torchrun as ``python -m ddpkit.launch.torchrun.agent --bind ADDRESS -- TORCHRUN_ARGS...``
(agent.py), which calls :func:`bind_store` before torchrun's own ``main``.

If the address cannot be bound (it is not this machine's), torchrun runs as it would have, on
every interface, after one line on stderr saying so.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from ddpkit.i18n import _
from ddpkit.launch.store_client import listening_fd


def bound_factory(original: Callable[..., Any], address: str, port: int,
                  bind: Callable[[str, int], int] = listening_fd) -> Callable[..., Any]:
    """``original`` (TCPStore), but the server side for ``port`` listens on ``address`` only."""

    def store(host: str, store_port: int, *args: Any, **kwargs: Any) -> Any:
        is_master = args[1] if len(args) > 1 else kwargs.get("is_master", False)
        if is_master and store_port == port and "master_listen_fd" not in kwargs:
            kwargs["master_listen_fd"] = bind(address, port)
        return original(host, store_port, *args, **kwargs)

    return store


def _master_port(args: Sequence[str]) -> int | None:
    for arg in args:
        if arg.startswith("--master-port=") or arg.startswith("--master_port="):
            return int(arg.split("=", 1)[1])
    return None


def bind_store(address: str, args: Sequence[str]) -> None:
    """Have torch's static rendezvous, once imported, serve its store on ``address`` only (the
    port of ``--master-port`` in torchrun's ``args``); when this machine cannot listen there, one
    line on stderr says so and torchrun's store listens on every interface, as it would have."""
    from torch.distributed.elastic.rendezvous import static_tcp_rendezvous as static

    port = _master_port(args)
    if port is None:
        return
    try:
        listening_fd_check(address)
        static.TCPStore = bound_factory(  # type: ignore[attr-defined,assignment]
            static.TCPStore, address, port)  # type: ignore[attr-defined]
    except OSError as exc:
        print(_("ddpkit: torchrun's store listens on every interface: cannot listen on "
                "{address} ({error})", address=address, error=exc.strerror or str(exc)),
              file=sys.stderr, flush=True)


def listening_fd_check(address: str) -> None:
    """OSError when ``address`` is not one this machine can listen on (port 0: any free port)."""
    import os

    os.close(listening_fd(address, 0))

