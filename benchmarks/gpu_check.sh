#!/usr/bin/env bash
# The GPU check: ddpkit on a machine with one NVIDIA GPU, in under 8 minutes, as one prepared run.
#
#   OUT=/some/dir bash benchmarks/gpu_check.sh
#
# Runs from the repository root with the machine's own python3 (its torch with CUDA; ddpkit from
# ./src on PYTHONPATH, nothing installed). Each step is bounded by `timeout`; a failed step is
# recorded and the next one still runs. Writes $OUT/summary.txt (one line per step, the figures)
# and $OUT/logs.tar.gz (every step's output and per-rank logs, the NCCL_DEBUG=INFO captures among
# them), so what comes back is two files.
#   1. `ddpkit test` with NCCL on one node, 1 rank (NCCL_DEBUG=INFO through --debug).
#   2. If network namespaces work here: a 2-node sim whose two nodes share the one GPU (their
#      hostnames differ, so NCCL treats them as two hosts and talks over eth1 sockets):
#      a. `ddpkit test --backend nccl` across both nodes (the interface chosen by ddpkit);
#      b. plain torchrun with no interface variable, NCCL_DEBUG=INFO: the wrong-interface bootstrap
#         (eth0 172.17.0.4 on both nodes) as NCCL really logs it, bounded at 60 s;
#      c. `ddpkit bench --quick --backend nccl` across both nodes.
#   3. Without namespaces: `ddpkit bench --quick --backend nccl` on one node.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d -t ddpkit-gpu.XXXXXX)}
PY=${PYTHON:-python3}
WORK=$(mktemp -d -t ddpkit-gpuwork.XXXXXX)
LOGS=$WORK/logs
mkdir -p "$OUT" "$LOGS"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
DDPKIT=("$PY" -m ddpkit)
SIM=dgpu
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

finish() {
  "${DDPKIT[@]}" sim down --name "$SIM" >>"$LOGS/sim-down.log" 2>&1 || true
  tar -czf "$OUT/logs.tar.gz" -C "$WORK" logs 2>/dev/null || true
  rm -rf "$WORK"
  say "logs: $OUT/logs.tar.gz"
}
trap finish EXIT

step() {  # step NAME SECONDS CMD... : run bounded, log to $LOGS/NAME.log, record status and time
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS rc=0
  timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>&1 || rc=$?
  local took=$((SECONDS - start)) state=ok
  [ "$rc" -eq 0 ] || state="FAILED rc=$rc"
  [ "$rc" -eq 124 ] && state="TIMED OUT after ${limit}s"
  say "$name: $state in ${took}s"
  return "$rc"
}

# --- the machine -------------------------------------------------------------------------------
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
"available", torch.cuda.is_available(), "nccl", ".".join(map(str, torch.cuda.nccl.version()))
if torch.cuda.is_available() else "-")' 2>&1
} >"$LOGS/machine.txt"
say "machine: $(tr '\n' ' ' <"$LOGS/machine.txt")"
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  say "no CUDA device visible to $PY: nothing to check"
  exit 1
fi

# --- 1. one node --------------------------------------------------------------------------------
step test-1node 120 "${DDPKIT[@]}" test --backend nccl --debug --quick --run-dir "$LOGS/test-1node-run"
tail -n 1 "$LOGS/test-1node.log" | sed 's/^/  /' | tee -a "$SUMMARY"

# --- 2. two simulated nodes sharing the GPU -----------------------------------------------------
if "${DDPKIT[@]}" sim up 2 --name "$SIM" --subnet 10.0.9.0/24 >"$LOGS/sim-up.log" 2>&1; then
  MASTER=$("${DDPKIT[@]}" sim status --name "$SIM" --json | "$PY" -c \
    'import json, sys; print(json.load(sys.stdin)["cluster"]["nodes"][0]["private_address"])')
  say "sim: 2 nodes up, master $MASTER"
  two_nodes() {  # two_nodes NAME SECONDS ARGS... : the same ddpkit command on node 1 then node 0
    local name=$1 limit=$2
    shift 2
    "${DDPKIT[@]}" sim exec --name "$SIM" 1 -- env CUDA_VISIBLE_DEVICES=0 "${DDPKIT[@]}" "$@" \
      --nnodes 2 --node-rank 1 --master-addr "$MASTER" --run-dir "$LOGS/$name-node1" \
      >"$LOGS/$name-node1.log" 2>&1 &
    local worker=$!
    step "$name" "$limit" "${DDPKIT[@]}" sim exec --name "$SIM" 0 -- env CUDA_VISIBLE_DEVICES=0 \
      "${DDPKIT[@]}" "$@" --nnodes 2 --node-rank 0 --master-addr "$MASTER" \
      --run-dir "$LOGS/$name-node0"
    local rc=$?
    wait "$worker" || rc=$?
    return "$rc"
  }
  two_nodes test-2node 150 test --backend nccl --debug --quick
  tail -n 1 "$LOGS/test-2node.log" | sed 's/^/  /' | tee -a "$SUMMARY"

  # b. the seed page's failure, as NCCL logs it: no interface variable, hostname -> eth0.
  cat >"$WORK/allreduce.py" <<'PY'
import os, torch, torch.distributed as dist
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
dist.init_process_group("nccl")
t = torch.ones(1 << 20, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
print("rank", dist.get_rank(), "sum", t[0].item())
dist.destroy_process_group()
PY
  for node in 1 0; do
    "${DDPKIT[@]}" sim exec --name "$SIM" "$node" -- env -u NCCL_SOCKET_IFNAME -u GLOO_SOCKET_IFNAME \
      CUDA_VISIBLE_DEVICES=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,NET \
      timeout --kill-after=5 60 "$PY" -m torch.distributed.run --nnodes 2 --nproc-per-node 1 \
      --node-rank "$node" --master-addr "$MASTER" --master-port 29511 "$WORK/allreduce.py" \
      >"$LOGS/wrong-interface-node$node.log" 2>&1 &
  done
  wait
  say "wrong-interface capture: $(grep -c 'NCCL INFO' "$LOGS"/wrong-interface-node*.log | tr '\n' ' ')"
  grep -h -m 3 -E 'Bootstrap : Using|NET/Socket : Using|Connection refused|WARN' \
    "$LOGS"/wrong-interface-node*.log | sed 's/^/  /' | tee -a "$SUMMARY"
  "${DDPKIT[@]}" doctor --log "$LOGS"/wrong-interface-node*.log >"$LOGS/wrong-interface-doctor.log" 2>&1
  say "  doctor on it: $(head -n 1 "$LOGS/wrong-interface-doctor.log")"

  two_nodes bench-2node 200 bench --quick --backend nccl
  grep -E 'busbw|efficien|recommend|FAILED' "$LOGS/bench-2node.log" | tail -n 8 | sed 's/^/  /' |
    tee -a "$SUMMARY"
else
  say "sim: network namespaces unavailable here ($(tail -n 1 "$LOGS/sim-up.log")); one node only"
  step bench-1node 200 "${DDPKIT[@]}" bench --quick --backend nccl --run-dir "$LOGS/bench-1node-run"
  grep -E 'busbw|FAILED' "$LOGS/bench-1node.log" | tail -n 8 | sed 's/^/  /' | tee -a "$SUMMARY"
fi
exit 0
