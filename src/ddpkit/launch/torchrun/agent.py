"""torchrun as ``ddpkit launch`` runs it on every node:
``python -m ddpkit.launch.torchrun.agent [--bind ADDRESS] -- TORCHRUN_ARGS...``.

torchrun's own ``main`` runs in this interpreter, unchanged, with two things around it:

* ``--bind ADDRESS`` (node 0 of a job of several): the store of torch's static rendezvous listens
  on that address only (:mod:`ddpkit.launch.torchrun.bound`).
* A torchrun that returned (its ranks succeeded, every node passed its exit barrier) ends without
  the interpreter's teardown (:func:`ddpkit.launch.ending.end_now`: faster by about 0.4 CPU-s, and
  no abort from a thread still inside torch's C++). A failure (an exception, a non-zero exit)
  ends the usual way, with its traceback, and so does a run that left a thread of its own running
  (the teardown would wait for it).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ddpkit.launch.ending import end_now

MODULE = "ddpkit.launch.torchrun.agent"
USAGE = f"usage: python -m {MODULE} [--bind ADDRESS] -- TORCHRUN_ARGS..."


def split_argv(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """``[--bind ADDRESS] -- TORCHRUN_ARGS...`` -> (the address or None, torchrun's arguments)."""
    args = list(argv)
    if args[:1] == ["--"]:
        return None, args[1:]
    if len(args) >= 3 and args[0] == "--bind" and args[2] == "--":
        return args[1], args[3:]
    raise SystemExit(USAGE)


def main(argv: Sequence[str] | None = None) -> None:
    address, args = split_argv(sys.argv[1:] if argv is None else argv)
    from torch.distributed import run as torchrun

    if address is not None:
        from ddpkit.launch.torchrun.bound import bind_store

        bind_store(address, args)
    sys.argv = ["torchrun", *args]
    torchrun.main()  # raises on a failure: the usual end, traceback and status
    end_now()


if __name__ == "__main__":
    main()
