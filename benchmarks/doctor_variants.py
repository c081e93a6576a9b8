"""How `ddpkit doctor --log` holds up when a real log reaches it the way tools around a run write it.

Each corpus log (tests/fixtures/real-logs/) is read as it is and then in forms that change how its
lines are written, never what they say: CRLF line ends; a UTF-8 byte-order mark (Windows editors);
UTF-16LE after its mark (Windows PowerShell 5.1's ">" and Out-File); a collector's time stamp
before each line (`kubectl logs --timestamps`, `docker logs --timestamps`, the CRI log files of
containerd); gzip; a launcher's tag or label before each line (torchrun's tee "[default0]:",
torch's excepthook "[rank0]: ", srun --label "0: ", pdsh "node3: ", Docker Compose
"trainer-1  | "); trailing spaces (Python prints "<type>: " before a message that starts on the next line);
colour codes around each line. For each form it prints how many logs' top finding (id and
severity) differs from the log's own: the fewer, the less an answer depends on how the lines were
collected.

    python benchmarks/doctor_variants.py [--quick] [--split dev|eval|all] [--show N]

The corpus is small, so --quick changes nothing but is accepted like the other benchmarks'.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIR = ROOT / "tests" / "fixtures" / "real-logs"
sys.path.insert(0, str(ROOT / "src"))

from ddpkit.doctor.log.diagnose import diagnose  # noqa: E402


def _each_line(prefix: bytes = b"", suffix: bytes = b"") -> Callable[[bytes], bytes]:
    return lambda data: b"\n".join(prefix + line + suffix if line else line
                                   for line in data.split(b"\n"))


def _utf16(data: bytes) -> bytes:
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\n", "\r\n")
    return b"\xff\xfe" + text.encode("utf-16-le")


FORMS: dict[str, Callable[[bytes], bytes]] = {
    "CRLF line ends": lambda data: data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"),
    "UTF-8 byte-order mark": lambda data: b"\xef\xbb\xbf" + data,
    "UTF-16LE (PowerShell 5.1)": _utf16,
    "kubectl --timestamps": _each_line(b"2024-10-11T20:10:11.640908017Z "),
    "CRI log file (containerd)": _each_line(b"2024-10-11T20:10:11.640908017Z stderr F "),
    "gzip-compressed": gzip.compress,
    "torchrun tee [default0]:": _each_line(b"[default0]:"),
    "torch excepthook [rank0]: ": _each_line(b"[rank0]: "),
    "srun --label": _each_line(b"0: "),
    "pdsh host label": _each_line(b"node3: "),
    "Docker Compose": _each_line(b"trainer-1  | "),
    "trailing spaces": _each_line(suffix=b"  "),
    "colour codes": _each_line(b"\x1b[0m", b"\x1b[0m"),
}


def top(data: bytes, folder: Path) -> tuple[str, str]:
    path = folder / "variant.log"
    path.write_bytes(data)
    findings = diagnose([str(path)])
    return (findings[0].id, findings[0].severity) if findings else ("", "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="accepted; the corpus is small")
    parser.add_argument("--split", choices=("dev", "eval", "all"), default="all")
    parser.add_argument("--show", type=int, default=0, metavar="N",
                        help="name up to N logs whose answer a form changes")
    args = parser.parse_args()
    corpus = json.loads((CORPUS_DIR / "corpus.json").read_text())
    logs = [e for e in corpus["logs"] if args.split == "all" or e.get("split") == args.split]
    changed: dict[str, list[str]] = {form: [] for form in FORMS}
    with tempfile.TemporaryDirectory() as folder:
        for entry in logs:
            data = (CORPUS_DIR / entry["file"]).read_bytes()
            own = top(data, Path(folder))
            for form, rewrite in FORMS.items():
                got = top(rewrite(data), Path(folder))
                if got != own:
                    changed[form].append(f"{entry['file']}: {own[0]} ({own[1]}) -> "
                                         f"{got[0]} ({got[1]})")
    print(f"{len(logs)} logs ({args.split}); logs whose top finding a form changes:")
    for form, names in changed.items():
        print(f"  {form:28} {len(names)}")
        for name in names[: args.show]:
            print(f"      {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
