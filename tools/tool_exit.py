"""How the repository's generator tools end when the file system refuses them (a full disk, a
read-only checkout, a path that is a directory): one line naming the path, the cause and the fix,
exit 1; never a traceback. The generated files are written with ``replace_file``, so the old
file stays whole."""

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
        print(f"{tool}: cannot write{where}: {reason}; the files it had written stay as they were."
              " Free space or fix the permissions, then rerun.", file=sys.stderr)
        return 1
