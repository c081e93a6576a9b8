"""torchrun as ``ddpkit launch`` runs it on every node:
``python -m ddpkit.launch.torchrun.agent [--bind ADDRESS] -- TORCHRUN_ARGS...``.

torchrun's own ``main`` runs in this interpreter, unchanged, with two things around it:

* ``--bind ADDRESS`` (node 0 of a job of several): the store of torch's static rendezvous listens
  on that address only (:mod:`ddpkit.launch.torchrun.bound`).
* A torchrun that returned (its ranks succeeded, every node passed its exit barrier) ends without
  the interpreter's teardown: an interpreter that has imported torch spends about 0.4 s of CPU
  after its last line, taking torch's modules apart one object at a time (measured with
  ``python -c "import torch.distributed.run"``: 1.7 to 2.0 CPU-s with the teardown, 1.3 with
  ``os._exit`` at the end, on a loaded 2-core box), and a job ends when its last node's torchrun
  has. The exit functions (``atexit``: logging's flush among them) run first and the output is
  flushed, so nothing torchrun printed or logged is lost. A failure (an exception, a non-zero
  exit) ends the usual way, with its traceback, and so does a run that left a thread of its own
  running (the teardown would wait for it).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TextIO

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


# CPython's status when flushing stdout or stderr at exit fails (Py_FinalizeEx: "Exception
# ignored ... BrokenPipeError", then 120): what was printed last did not reach its reader
FLUSH_FAILED = 120


def end_now(exit_functions: Callable[[], None] = atexit._run_exitfuncs,
            end: Callable[[int], object] = os._exit,
            streams: Sequence[TextIO] | None = None) -> None:
    """End the process after the exit functions, without the interpreter's teardown: status 0,
    or :data:`FLUSH_FAILED` as CPython's own end gives when the last output could not be
    flushed; return (the usual end follows) while a non-daemon thread other than this one runs."""
    this = threading.current_thread()
    if any(t is not this and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    exit_functions()
    status = 0
    for stream in (sys.stdout, sys.stderr) if streams is None else streams:
        try:
            stream.flush()
        except Exception:  # (OSError: a closed pipe, a full disk; ValueError: a closed file)
            status = FLUSH_FAILED
    end(status)


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
