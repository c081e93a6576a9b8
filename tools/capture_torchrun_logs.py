"""Produce real torchrun logs for the issue-24 tests (tests/fixtures/logs/captured/i24_*.log).

Runs a tiny Gloo script under torchrun as two "nodes" on 127.0.0.1 (two torchrun processes):
  wait_rdzv   node 0 alone, waits for node 1 that never comes, torchrun killed with SIGTERM
  wait_coll   both nodes; node 1's rank sleeps before the all_reduce; node 0 killed with SIGTERM
  rank_fails  both nodes; node 1's rank raises ValueError after init (both nodes' logs kept)
  ok          both nodes; the job succeeds

(wait_rdzv leaves an empty log with torch 2.13: torchrun installs its SIGTERM handler only once
the workers start, so a master killed while it waits at the rendezvous dies without a word.)

    python tools/capture_torchrun_logs.py OUT_DIR [--python PYTHON] [--only MODE ...]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = '''
import os, sys, time
import torch, torch.distributed as dist
mode = sys.argv[1]
dist.init_process_group("gloo", timeout=__import__("datetime").timedelta(seconds=60))
rank = dist.get_rank()
print(f"rank {rank} initialised", flush=True)
if rank == 1 and mode == "wait_coll":
    time.sleep(600)
if rank == 1 and mode == "rank_fails":
    raise ValueError("bad value in batch 3")
t = torch.ones(4)
dist.all_reduce(t)
print(f"rank {rank} sum {t.tolist()}", flush=True)
dist.destroy_process_group()
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun(python: str, node: int, port: int, script: Path, mode: str,
             log: Path) -> subprocess.Popen[bytes]:
    out = log.open("wb")
    return subprocess.Popen(
        [python, "-m", "torch.distributed.run", "--nnodes=2", f"--node-rank={node}",
         "--nproc-per-node=1", "--master-addr=127.0.0.1", f"--master-port={port}",
         str(script), mode],
        stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"})


def stop(proc: subprocess.Popen[bytes], sig: int) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, sig)  # torchrun itself, as a scheduler or Ctrl-C would
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--only", action="append", default=[],
                        choices=("wait_rdzv", "wait_coll", "rank_fails", "ok"))
    args = parser.parse_args()
    modes = args.only or ["wait_rdzv", "wait_coll", "rank_fails", "ok"]
    args.out.mkdir(parents=True, exist_ok=True)
    script = args.out / "i24_script.py"
    script.write_text(SCRIPT)
    if "wait_rdzv" in modes:
        port = free_port()
        node0 = torchrun(args.python, 0, port, script, "wait_rdzv",
                         args.out / "i24_wait_rdzv_node0.log")
        time.sleep(12)
        stop(node0, signal.SIGTERM)
    if "wait_coll" in modes:
        port = free_port()
        node0 = torchrun(args.python, 0, port, script, "wait_coll",
                         args.out / "i24_wait_coll_node0.log")
        node1 = torchrun(args.python, 1, port, script, "wait_coll",
                         args.out / "i24_wait_coll_node1.log")
        time.sleep(25)
        stop(node0, signal.SIGTERM)
        stop(node1, signal.SIGTERM)
    for mode in ("rank_fails", "ok"):
        if mode not in modes:
            continue
        port = free_port()
        node0 = torchrun(args.python, 0, port, script, mode, args.out / f"i24_{mode}_node0.log")
        node1 = torchrun(args.python, 1, port, script, mode, args.out / f"i24_{mode}_node1.log")
        for proc in (node0, node1):
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                stop(proc, signal.SIGTERM)
    script.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
