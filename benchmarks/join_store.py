"""The join store at 256 and 1,000 workers: where the token mode's master stops keeping up (issue 33).

The real master (``host_store`` + ``MasterSide``: the c10d TCPStore server, publish, wait for every
claim, release the go, then watch heartbeats as ``ddpkit launch --nnodes N`` does) runs in one
process; the workers are threads, spread over a few light processes, each running the real
``WorkerSide`` against it (connect, fetch the job, claim a rank, heartbeat on a second connection,
wait for the go, beat for the heartbeat phase, report done). No torch job runs anywhere (torch is
imported only for its TCPStore). Measured:

* join: from the first worker's start until every worker has its go (and the master's share);
* store operations per second during the heartbeat phase (every client call, master and workers,
  counted where it is made), the master's CPU (% of one core) and RSS there;
* the master's peak RSS and its CPU seconds over the whole run.

    python benchmarks/join_store.py [--workers 256,1000] [--beat 20] [--quick]

``--quick`` (or CI=true): 32 workers, 8 s of heartbeats. Loopback only; no root needed. Workers and
master share this machine's cores, so the figures are a floor for a master on its own machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import resource
import socket
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import psutil

THREADS_PER_PROCESS = 250


def _count_calls() -> list[int]:
    """Count every store call this process makes (``store_client.within`` wraps each one)."""
    from ddpkit.launch import store_client

    counter = [0]
    lock = threading.Lock()
    real = store_client.within

    def counted(action: Any, seconds: float) -> Any:
        with lock:
            counter[0] += 1
        return real(action, seconds)

    store_client.within = counted  # type: ignore[assignment]
    return counter


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def master_main(token_text: str, nnodes: int, beat_s: float, out: Any) -> None:
    from ddpkit.launch.job import JobSpec
    from ddpkit.launch.join.sides import JoinJob, MasterSide
    from ddpkit.launch.join.store import host_store
    from ddpkit.launch.join.tokens import parse_token

    calls = _count_calls()
    token = parse_token(token_text)
    master = MasterSide(host_store(token), JoinJob(JobSpec(command="launch", nnodes=nnodes,
                                                           entry=("train.py",)), "127.0.0.1"))
    master.publish()
    out.put(("ready", time.time()))
    master.wait_for_nodes(lambda node: None, timeout=1200)
    master.release()
    go_at = time.time()
    out.put(("go", go_at))
    me = psutil.Process()
    # the heartbeat phase, as the master's own share waits: poll every POLL_S
    time.sleep(2.0)  # let every worker see the go first
    cpu0, calls0, t0 = sum(me.cpu_times()[:2]), calls[0], time.monotonic()
    rss = 0
    while time.monotonic() - t0 < beat_s:
        master.poll()
        rss = max(rss, me.memory_info().rss)
        time.sleep(0.05)
    seconds = time.monotonic() - t0
    out.put(("beat", {"seconds": seconds, "master_calls": calls[0] - calls0,
                      "master_cpu_s": sum(me.cpu_times()[:2]) - cpu0, "master_rss": rss,
                      "lost": len(master.lost)}))
    outcomes = master.collect(wait=120)
    out.put(("done", {"ok": sum(o.state == "ok" for o in outcomes), "workers": len(outcomes),
                      "master_cpu_total_s": sum(me.cpu_times()[:2])}))
    time.sleep(1.0)


def workers_main(token_text: str, count: int, beat_s: float, out: Any) -> None:
    from ddpkit.launch.join.store import connect_store
    from ddpkit.launch.join.tokens import parse_token
    from ddpkit.launch.join.worker import WorkerSide
    from ddpkit.launch.outcomes import OK, NodeOutcome

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    calls = _count_calls()
    token = parse_token(token_text)
    went: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        try:
            store = connect_store(token, timeout=600)
            side = WorkerSide(store)
            spec = side.fetch_job()
            rank = side.claim_rank(spec, f"w{index}", "127.0.0.1", "lo")
            side.start_heartbeat(lambda why: errors.append(why))
            side.wait_for_go(timeout=1200)
            with lock:
                went.append(time.time())
            time.sleep(beat_s + 4.0)
            side.report(NodeOutcome(node_rank=rank, host=f"w{index}", state=OK))
        except Exception as exc:  # noqa: BLE001 - counted and reported
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    # sample this process's call counter, to count the calls inside the master's beat window
    samples: list[tuple[float, int]] = []
    while any(t.is_alive() for t in threads):
        samples.append((time.time(), calls[0]))
        time.sleep(0.25)
    samples.append((time.time(), calls[0]))
    out.put(("workers", {"went": went, "errors": errors[:5], "error_count": len(errors),
                         "samples": samples}))


def calls_between(samples: Sequence[tuple[float, int]], start: float, end: float) -> float:
    def at(moment: float) -> float:
        before = [s for s in samples if s[0] <= moment]
        after = [s for s in samples if s[0] >= moment]
        if not before:
            return float(samples[0][1])
        if not after:
            return float(samples[-1][1])
        (t0, c0), (t1, c1) = before[-1], after[0]
        return c0 if t1 == t0 else c0 + (c1 - c0) * (moment - t0) / (t1 - t0)

    return at(end) - at(start)


def run(workers: int, beat_s: float) -> dict[str, Any]:
    from ddpkit.launch.join.tokens import new_token

    token = new_token("127.0.0.1", _free_port())
    queue: Any = mp.get_context("spawn").Queue()
    ctx = mp.get_context("spawn")
    master = ctx.Process(target=master_main, args=(str(token), workers + 1, beat_s, queue))
    started = time.time()
    master.start()
    events: dict[str, Any] = {}
    while "ready" not in events:
        kind, value = queue.get(timeout=120)
        events[kind] = value
    me = psutil.Process(master.pid)
    groups = [THREADS_PER_PROCESS] * (workers // THREADS_PER_PROCESS)
    groups += [workers % THREADS_PER_PROCESS] if workers % THREADS_PER_PROCESS else []
    procs = [ctx.Process(target=workers_main, args=(str(token), n, beat_s, queue)) for n in groups]
    for proc in procs:
        proc.start()
    first_start = time.time()
    peak_rss = 0
    results: list[dict[str, Any]] = []
    while "done" not in events or len(results) < len(procs):
        try:
            kind, value = queue.get(timeout=0.5)
            if kind == "workers":
                results.append(value)
            else:
                events[kind] = value
        except Exception:  # noqa: BLE001 - queue.Empty: sample and go on
            pass
        with contextlib.suppress(psutil.Error):
            peak_rss = max(peak_rss, me.memory_info().rss)
        if time.time() - started > 1800:
            raise TimeoutError("the run took over 30 minutes")
    for proc in [master, *procs]:
        proc.join(timeout=60)
    beat = events["beat"]
    went = [moment for r in results for moment in r["went"]]
    window_end = events["go"] + 2.0 + beat["seconds"]
    worker_calls = sum(calls_between(r["samples"], events["go"] + 2.0, window_end)
                       for r in results)
    return {
        "workers": workers,
        "all_go_after_s": round(max(went) - first_start, 2) if len(went) == workers else None,
        "master_released_after_s": round(events["go"] - first_start, 2),
        "workers_with_go": len(went),
        "worker_errors": sum(r["error_count"] for r in results),
        "error_sample": [e for r in results for e in r["errors"]][:3],
        "beat_phase_s": round(beat["seconds"], 1),
        "store_ops_per_s": round((worker_calls + beat["master_calls"]) / beat["seconds"]),
        "master_ops_per_s": round(beat["master_calls"] / beat["seconds"]),
        "master_cpu_pct_in_beat": round(100 * beat["master_cpu_s"] / beat["seconds"], 1),
        "master_rss_mib_in_beat": round(beat["master_rss"] / 2**20, 1),
        "master_peak_rss_mib": round(peak_rss / 2**20, 1),
        "master_cpu_total_s": round(events["done"]["master_cpu_total_s"], 1),
        "heartbeats_lost": beat["lost"],
        "done_ok": events["done"]["ok"],
        "wall_s": round(time.time() - started, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default=None, help="comma-separated counts (256,1000)")
    parser.add_argument("--beat", type=float, default=None, help="heartbeat phase seconds")
    parser.add_argument("--quick", action="store_true", default=os.environ.get("CI") == "true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    counts = [int(c) for c in (args.workers or ("32" if args.quick else "256,1000")).split(",")]
    beat = args.beat or (8.0 if args.quick else 20.0)
    rows = []
    for count in counts:
        row = run(count, beat)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"# benchmarks/join_store.py: real master store, worker threads, {os.cpu_count()} cores")
    print("| workers | all have the go, s | store ops/s (beats) | master ops/s | master CPU % "
          "| master RSS MiB (peak) | lost | worker errors |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['workers']} | {r['all_go_after_s']} | {r['store_ops_per_s']} | "
              f"{r['master_ops_per_s']} | {r['master_cpu_pct_in_beat']} | "
              f"{r['master_rss_mib_in_beat']} ({r['master_peak_rss_mib']}) | "
              f"{r['heartbeats_lost']} | {r['worker_errors']} |")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=2)
    return 0 if all(r["all_go_after_s"] is not None and not r["worker_errors"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
