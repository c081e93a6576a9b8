"""torch in ddpkit's own process, with its C++ log quiet unless -v asks for it.

ddpkit's own process uses torch only for c10d store clients and servers (the hang watcher's
progress counter, the join token's store, the cluster doctor's meeting). Their failures are
ddpkit's to report, and it does, in one line (``store_client.first_line``); but torch's C++ client
also logs each one itself, straight to file descriptor 2 through c10's logger, with the C++
backtrace of the exception (``recvValue failed ... frame #0 ...``, a connect retry block of ~26
lines). No Python logger or warning filter reaches those lines, and torch has no Python call to
change that logger's threshold: it is read once, from ``TORCH_CPP_LOG_LEVEL``, when torch's C
extension initialises (``c10::initLogging`` at ``import torch``).

So the CLI imports torch itself, before any library code does, with ``TORCH_CPP_LOG_LEVEL=FATAL``
set only for the duration of that import, then removed again (the user's own value, if any, is
left alone, and -v leaves torch's default). Why this way:

- the setting is this process's only: torchrun and the ranks are started with the environment
  their plan lists (``NodePlan.env``), read before the import, so their C++ warnings still reach
  ``torchrun.log`` and the per-rank logs as torch prints them, and ``doctor --log`` still reads
  them;
- the library never touches ``os.environ`` (house rule); only this edge does, for the seconds of
  one import;
- commands that never use torch in-process (``nics``, ``plan``, ``doctor --log``, a dry run) still
  never import it.

:func:`import_torch` runs the import in the caller's thread (a command that needs torch at once:
the join store, the cluster doctor). A launch's only in-process torch user, the hang watcher's
progress counter, starts only once the ranks have run a while (a short job never pays for the
import); :func:`quiet_store_connector` does the import there, in the counter's own thread. By
then every environment snapshot of the command is taken (the plan holds its own copy), and the
launch's main thread only polls torchrun: it reads no ``os.environ`` and starts no process that
reads the variable (py-spy, at most), so nothing else sees it in that window.
"""

from __future__ import annotations

import os
import sys

from ddpkit.cli.output.console import Verbosity
from ddpkit.launch.hang.progress_exchange import Connector, bystander
from ddpkit.launch.store_client import Connected

CPP_LOG_LEVEL = "TORCH_CPP_LOG_LEVEL"
QUIET_LEVEL = "FATAL"  # c10d logs its store failures at ERROR and WARNING


def _import(verbosity: Verbosity) -> None:
    if "torch" in sys.modules:
        return  # too late to change (and nothing to do when it was this function)
    quiet = verbosity != "verbose" and CPP_LOG_LEVEL not in os.environ
    if quiet:
        os.environ[CPP_LOG_LEVEL] = QUIET_LEVEL
    try:
        import torch.distributed  # noqa: F401 - the import is the point
    except ImportError:
        pass  # the command reports a missing torch where it needs it
    finally:
        if quiet:
            os.environ.pop(CPP_LOG_LEVEL, None)


def import_torch(verbosity: Verbosity) -> None:
    """Import torch now (see the module's note)."""
    _import(verbosity)


def quiet_store_connector(verbosity: Verbosity) -> Connector:
    """The progress counter's connector: torch imported quietly first (see the module's note)."""

    def connect(address: str, port: int, deadline: float) -> Connected:
        _import(verbosity)
        return bystander(address, port, deadline)

    return connect
