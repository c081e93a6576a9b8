"""How the repository's generator tools end when the file system refuses them (a full disk, a
read-only checkout, a path under a file): one line naming the cause and the fix (and the path,
where the error names one), exit 1; never a traceback. Each generated file is written with
``replace_file``: it is the old one or the new one, never half of either."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


def run(main: Callable[[], int], tool: str) -> int:
    """``main()``'s exit code, or 1 after one line on stderr if it raised ``OSError``."""
    try:
        return main()
    except OSError as error:
        where = f" {error.filename}" if error.filename else ""
        reason = error.strerror or os.strerror(error.errno or 0) or str(error)
        print(f"{tool}: cannot write{where}: {reason}; no file is left half-written. Free space or"
              " fix the permissions, then rerun.", file=sys.stderr)
        return 1
