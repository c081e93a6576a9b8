"""Start-up of `ddpkit nics` and `ddpkit plan` against `python -c pass`, side by side in one run.

Target (issue 20, was 8x in issue 2): each command's wall time <= 5x `python -c pass` on the same
interpreter. Runs alternate between the commands so a noisy machine slows all alike; the medians
and their ratios are printed. Short mode (fewer runs) with --quick or when CI=true.

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

TARGET_RATIO = 5.0
BASELINE = [sys.executable, "-c", "pass"]
CANDIDATES = {
    "python -m ddpkit nics": [sys.executable, "-m", "ddpkit", "nics"],
    "python -m ddpkit plan": [sys.executable, "-m", "ddpkit", "plan", "--params", "25.6M",
                              "--nodes", "2", "--gpus-per-node", "4", "--inter-node", "1Gbit",
                              "--step-compute", "0.3s"],
}


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

    wall_time(BASELINE)  # warm the page cache for all before timing anything
    for argv in CANDIDATES.values():
        wall_time(argv)
    base: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in CANDIDATES}
    for _ in range(runs):
        base.append(wall_time(BASELINE))
        for name, argv in CANDIDATES.items():
            times[name].append(wall_time(argv))
    base_ms = statistics.median(base) * 1000
    bytecode = "off (PYTHONDONTWRITEBYTECODE)" if sys.dont_write_bytecode else "on"
    print(f"interpreter            {sys.executable} (bytecode cache {bytecode})")
    print(f"runs                   {runs} each, alternating{' (quick)' if quick else ''}")
    print(f"python -c pass         median {base_ms:7.1f} ms  (min {min(base) * 1000:.1f})")
    over = False
    for name, samples in times.items():
        ms = statistics.median(samples) * 1000
        ratio = ms / base_ms
        over = over or ratio > TARGET_RATIO
        verdict = "ok" if ratio <= TARGET_RATIO else "OVER TARGET"
        print(f"{name:22} median {ms:7.1f} ms  (min {min(samples) * 1000:.1f})  "
              f"{ratio:.2f}x  (target <= {TARGET_RATIO:g}x: {verdict})")
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
