"""Start-up of `ddpkit nics` in Chinese (LANG=zh_CN.UTF-8) against English (LANG=C.UTF-8).

Target (issue 23): the zh run's median wall time within 10% of the English one. The Chinese run
pays for loading the gettext catalogue (src/ddpkit/locale/zh_CN/LC_MESSAGES/ddpkit.mo) and for
translating what it prints. Runs alternate between the two languages so a noisy machine slows
both alike; the medians and their ratio are printed. Every other locale variable (LANGUAGE,
LC_ALL, LC_MESSAGES) is removed from the children so LANG alone decides.

    python benchmarks/startup_lang.py [--runs N] [--short] [--check]

--short (also when CI=true) runs 5 pairs; --check exits 1 when the ratio is over the target (off
by default: timings on a shared box are noisy, and a benchmark is not a test).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

TARGET_RATIO = 1.10
COMMAND = [sys.executable, "-m", "ddpkit", "nics"]
LANGS = {"en": "C.UTF-8", "zh": "zh_CN.UTF-8"}
_LOCALE_VARIABLES = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")


def environment(lang: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LOCALE_VARIABLES}
    env["LANG"] = lang
    return env


def run(lang: str) -> tuple[float, str]:
    """Wall time of one `ddpkit nics` under LANG=lang, and what it printed."""
    env = environment(lang)
    start = time.perf_counter()
    proc = subprocess.run(COMMAND, capture_output=True, env=env, timeout=120)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 3):  # 3: no usable interface is still a full run of the command
        raise SystemExit(f"LANG={lang} {' '.join(COMMAND)} failed ({proc.returncode}): "
                         f"{proc.stderr.decode(errors='replace')[-500:]}")
    return elapsed, (proc.stdout + proc.stderr).decode("utf-8", errors="replace")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=None, help="runs per language (default 21)")
    parser.add_argument("--short", action="store_true", help="short mode: 5 runs (also CI=true)")
    parser.add_argument("--check", action="store_true",
                        help=f"exit 1 when zh is over {TARGET_RATIO:g}x English")
    args = parser.parse_args()
    short = args.short or os.environ.get("CI", "").lower() == "true"
    runs = args.runs or (5 if short else 21)

    outputs = {name: run(lang)[1] for name, lang in LANGS.items()}  # warm the page cache
    han = sum("\u4e00" <= ch <= "\u9fff" for ch in outputs["zh"])
    times: dict[str, list[float]] = {name: [] for name in LANGS}
    for index in range(runs):
        order = list(LANGS.items()) if index % 2 == 0 else list(reversed(LANGS.items()))
        for name, lang in order:
            times[name].append(run(lang)[0])
    medians = {name: statistics.median(samples) * 1000 for name, samples in times.items()}
    ratio = medians["zh"] / medians["en"]
    verdict = "ok" if ratio <= TARGET_RATIO else "OVER TARGET"
    print(f"command                {' '.join(COMMAND[1:])} ({sys.executable})")
    print(f"runs                   {runs} per language, interleaved{' (short)' if short else ''}")
    for name, lang in LANGS.items():
        print(f"LANG={lang:16} median {medians[name]:7.1f} ms  "
              f"(min {min(times[name]) * 1000:.1f}, max {max(times[name]) * 1000:.1f})")
    print(f"zh / en                {ratio:.3f}  (target <= {TARGET_RATIO:.2f}: {verdict}; "
          f"the zh run printed {han} Chinese characters)")
    return 1 if args.check and ratio > TARGET_RATIO else 0


if __name__ == "__main__":
    sys.exit(main())
