"""Ending a process that has imported torch without the interpreter's teardown.

Two reasons, both measured here:

* **An abort instead of the chosen status.** A daemon thread that is inside one of torch's C++
  calls with the GIL released (a store call under a deadline, a heartbeat's round trip) and
  returns from it after the interpreter has begun to finalize is ended by CPython (3.13 and
  older) with ``pthread_exit``, which unwinds through pybind11's ``gil_scoped_release``
  destructor: C++ calls ``std::terminate`` ("terminate called without an active exception") and
  the process dies of SIGABRT, whatever status ddpkit chose. Reproduced with a TCPStore client's
  ``wait`` that times out while a module is being torn down (``test_launch_ending.py``); seen in
  CI as ``ddpkit join`` exiting -6 after its job-failed summary.
* **Time.** An interpreter that has imported torch spends about 0.4 s of CPU after its last line
  taking torch's modules apart one object at a time (measured with ``python -c "import
  torch.distributed.run"``: 1.7 to 2.0 CPU-s with the teardown, 1.3 with ``os._exit`` at the end,
  on a loaded 2-core box); a job ends when its last node's torchrun has.

The exit functions (``atexit``: logging's flush, temporary directories' removal) run first and the
standard streams are flushed, so nothing printed, logged or cleaned up at exit is lost. A process
in which a thread of its own that is not a daemon still runs is left to the usual end, which waits
for that thread.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TextIO

# CPython's status when flushing stdout or stderr at exit fails (Py_FinalizeEx: "Exception
# ignored ... BrokenPipeError", then 120): what was printed last did not reach its reader
FLUSH_FAILED = 120


def end_now(status: int = 0, *, exit_functions: Callable[[], None] = atexit._run_exitfuncs,
            end: Callable[[int], object] = os._exit,
            streams: Sequence[TextIO] | None = None) -> None:
    """End the process with ``status`` after the exit functions, without the interpreter's
    teardown; :data:`FLUSH_FAILED` instead of 0, as CPython's own end gives, when the last output
    could not be flushed. Returns (the usual end follows) while a non-daemon thread other than
    this one runs."""
    if _others_alive(daemon=False):
        return
    exit_functions()
    for stream in (sys.stdout, sys.stderr) if streams is None else streams:
        try:
            stream.flush()
        except Exception:  # (OSError: a closed pipe, a full disk; ValueError: a closed file)
            status = status or FLUSH_FAILED
    end(status)


def daemon_threads_alive() -> bool:
    """Whether a daemon thread other than this one still runs: one may be inside a C++ call of
    torch's that returns while the interpreter finalizes (see the module's text)."""
    return _others_alive(daemon=True)


def _others_alive(*, daemon: bool) -> bool:
    """Whether a thread other than this one, a daemon or not as ``daemon`` says, still runs."""
    this = threading.current_thread()
    return any(t is not this and t.daemon is daemon and t.is_alive() for t in threading.enumerate())
