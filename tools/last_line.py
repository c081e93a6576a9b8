"""Does a command's saved output end with the line a README quotes? (CI, both languages.)

    python tools/last_line.py README.md en OUTPUT_FILE
    python tools/last_line.py README.zh-CN.md zh OUTPUT_FILE

The README quotes the main job's last line after a lead-in (`Its last line reads like` in English,
`最后一行形如` in Chinese); numbers may differ, every other character must be the same. This only
reads files: it never runs the job, so CI runs each job once and compares its saved output.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

LEAD_INS = {"en": "Its last line reads like", "zh": "最后一行形如"}
_NUMBER = r"[0-9]+(?:\.[0-9]+)?"


def quoted(readme_text: str, lead_in: str) -> str:
    """The line the README quotes after ``lead_in`` (ValueError when it quotes none)."""
    found = re.search(re.escape(lead_in) + r"\s*`([^`]+)`", readme_text)
    if found is None:
        raise ValueError(f"the README no longer quotes the main job's last line ({lead_in!r})")
    return found.group(1)


def matches(quote: str, line: str) -> bool:
    """``line`` is ``quote`` with maybe other numbers."""
    pattern = re.sub(r"[0-9]+(?:\\\.[0-9]+)?", lambda _m: _NUMBER, re.escape(quote))
    return re.fullmatch(pattern, line.strip()) is not None


def last_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in LEAD_INS:
        print(__doc__, file=sys.stderr)
        return 2
    readme, lang, output = Path(argv[0]), argv[1], Path(argv[2])
    quote = quoted(readme.read_text(encoding="utf-8"), LEAD_INS[lang])
    last = last_line(output.read_text(encoding="utf-8", errors="replace"))
    if not matches(quote, last):
        print(f"ci: {readme} quotes {quote!r}, the job printed {last!r}", file=sys.stderr)
        return 1
    print(f"ci: the main job's last line matches {readme}: {last}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
