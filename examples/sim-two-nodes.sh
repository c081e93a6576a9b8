#!/usr/bin/env bash
# Rehearse a two-node job on this one machine (as root): bring up two simulated rented instances
# (network namespaces whose eth0 is the same unreachable 172.17.0.4 and whose eth1 is the private
# network), run `ddpkit test` across them, and tear everything down again, even on failure.
#
#   bash examples/sim-two-nodes.sh                    # unshaped
#   RATE=1gbit bash examples/sim-two-nodes.sh         # private network shaped to 1 Gbit/s
#
# Knobs (environment): DDPKIT_SIM_NAME (cluster name, default demo), DDPKIT_SIM_SUBNET (default
# 10.0.0.0/24), DDPKIT_PORT (default 29500), RATE, DDPKIT_RUN_DIR (keep the per-rank logs there;
# by default they go to a temporary directory that is removed at the end), DDPKIT (the command).
set -euo pipefail
NAME=${DDPKIT_SIM_NAME:-demo}
SUBNET=${DDPKIT_SIM_SUBNET:-10.0.0.0/24}
DDPKIT=${DDPKIT:-ddpkit}
PORT=${DDPKIT_PORT:-29500}

WORK=$(mktemp -d -t ddpkit-sim.XXXXXX)
RUNS=${DDPKIT_RUN_DIR:-$WORK/runs}
cleanup() {
  $DDPKIT sim down --name "$NAME" >"$WORK/down.log" 2>&1 || cat "$WORK/down.log" >&2
  rm -rf "$WORK"
}
trap cleanup EXIT

$DDPKIT sim up 2 --name "$NAME" --subnet "$SUBNET" ${RATE:+--rate "$RATE"}
MASTER=$($DDPKIT sim status --name "$NAME" --json |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["cluster"]["nodes"][0]["private_address"])')

# Node 1 (a worker) in the background, its output in a log; node 0 (the master) in the foreground.
LOG=$WORK/node1.log
$DDPKIT sim exec --name "$NAME" 1 -- $DDPKIT test --nnodes 2 --node-rank 1 \
  --master-addr "$MASTER" --master-port "$PORT" --run-dir "$RUNS/node1" --quick >"$LOG" 2>&1 &
WORKER=$!
status=0
$DDPKIT sim exec --name "$NAME" 0 -- $DDPKIT test --nnodes 2 --node-rank 0 \
  --master-addr "$MASTER" --master-port "$PORT" --run-dir "$RUNS/node0" --quick || status=$?
wait "$WORKER" || status=$?
if [ "$status" -ne 0 ]; then
  echo "--- node 1 output ---" >&2
  tail -n 40 "$LOG" >&2
fi
exit "$status"
