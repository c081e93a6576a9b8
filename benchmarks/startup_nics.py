"""Start-up of `ddpkit nics` against `python -c pass`, measured side by side in one run.

Target (issue 2): `ddpkit nics` wall time <= 8x `python -c pass` on the same interpreter.
Runs alternate between the two commands so a noisy machine slows both alike; the medians and
their ratio are printed. Short mode (fewer runs) with --quick or when CI=true.

    python benchmarks/startup_nics.py [--runs N] [--quick] [--check]

--check exits 1 when the ratio is over the target (off by default: timings on a shared box are
noisy, and a benchmark is not a test).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

TARGET_RATIO = 8.0
BASELINE = [sys.executable, "-c", "pass"]
CANDIDATE = [sys.executable, "-m", "ddpkit", "nics"]


def wall_time(argv: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 3):  # 3: no usable interface is still a full run of the command
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=None, help="runs of each command (default 21)")
    parser.add_argument("--quick", action="store_true", help="short mode: 5 runs (also when CI=true)")
    parser.add_argument("--check", action="store_true", help=f"exit 1 above {TARGET_RATIO:g}x")
    args = parser.parse_args()
    quick = args.quick or os.environ.get("CI", "").lower() == "true"
    runs = args.runs or (5 if quick else 21)

    wall_time(BASELINE)  # warm the page cache for both before timing anything
    wall_time(CANDIDATE)
    base: list[float] = []
    cand: list[float] = []
    for _ in range(runs):
        base.append(wall_time(BASELINE))
        cand.append(wall_time(CANDIDATE))
    base_ms = statistics.median(base) * 1000
    cand_ms = statistics.median(cand) * 1000
    ratio = cand_ms / base_ms
    verdict = "ok" if ratio <= TARGET_RATIO else "OVER TARGET"
    bytecode = "off (PYTHONDONTWRITEBYTECODE)" if sys.dont_write_bytecode else "on"
    print(f"interpreter            {sys.executable} (bytecode cache {bytecode})")
    print(f"runs                   {runs} each, alternating{' (quick)' if quick else ''}")
    print(f"python -c pass         median {base_ms:7.1f} ms  (min {min(base) * 1000:.1f})")
    print(f"python -m ddpkit nics  median {cand_ms:7.1f} ms  (min {min(cand) * 1000:.1f})")
    print(f"ratio                  {ratio:.2f}x  (target <= {TARGET_RATIO:g}x: {verdict})")
    return 1 if args.check and ratio > TARGET_RATIO else 0


if __name__ == "__main__":
    sys.exit(main())
