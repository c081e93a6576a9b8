#!/usr/bin/env bash
# Rehearse a two-node job on this one machine (as root): bring up two simulated rented instances
# (network namespaces whose eth0 is the same unreachable 172.17.0.4 and whose eth1 is the private
# network), run `ddpkit test` across them, and tear everything down again, even on failure.
#
#   sudo bash examples/sim-two-nodes.sh            # unshaped
#   RATE=1gbit sudo -E bash examples/sim-two-nodes.sh   # private network shaped to 1 Gbit/s
set -euo pipefail
NAME=${DDPKIT_SIM_NAME:-demo}
SUBNET=${DDPKIT_SIM_SUBNET:-10.0.0.0/24}
DDPKIT=${DDPKIT:-ddpkit}

$DDPKIT sim up 2 --name "$NAME" --subnet "$SUBNET" ${RATE:+--rate "$RATE"}
trap '$DDPKIT sim down --name "$NAME"' EXIT

MASTER=$($DDPKIT sim status --name "$NAME" --json |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["cluster"]["nodes"][0]["private_address"])')
PORT=${DDPKIT_PORT:-29500}

# Node 1 (a worker) in the background, its output in a log; node 0 (the master) in the foreground.
LOG=$(mktemp -t ddpkit-node1.XXXXXX.log)
$DDPKIT sim exec --name "$NAME" 1 -- $DDPKIT test --nnodes 2 --node-rank 1 \
  --master-addr "$MASTER" --master-port "$PORT" --quick >"$LOG" 2>&1 &
WORKER=$!
status=0
$DDPKIT sim exec --name "$NAME" 0 -- $DDPKIT test --nnodes 2 --node-rank 0 \
  --master-addr "$MASTER" --master-port "$PORT" --quick || status=$?
wait "$WORKER" || status=$?
if [ "$status" -ne 0 ]; then
  echo "--- node 1 output ($LOG) ---" >&2
  tail -n 40 "$LOG" >&2
fi
exit "$status"
