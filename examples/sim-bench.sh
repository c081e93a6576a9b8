#!/usr/bin/env bash
# A quick `ddpkit bench` on two simulated nodes (as root): raw TCP, the collective sweep and DDP
# scaling with every quick setting; prints node 0's tables and exits non-zero unless every stage
# of the bench ran OK. Tears the cluster and its temporary files down, even on failure.
#
#   bash examples/sim-bench.sh                 # eth1 shaped to 1 Gbit/s
#   RATE= bash examples/sim-bench.sh           # unshaped
set -euo pipefail
NAME=${DDPKIT_SIM_NAME:-dbench}
SUBNET=${DDPKIT_SIM_SUBNET:-10.0.1.0/24}
RATE=${RATE-1gbit}
DDPKIT=${DDPKIT:-ddpkit}
PORT=${DDPKIT_PORT:-29500}

WORK=$(mktemp -d -t ddpkit-bench.XXXXXX)
cleanup() { $DDPKIT sim down --name "$NAME" >/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
$DDPKIT sim up 2 --name "$NAME" --subnet "$SUBNET" ${RATE:+--rate "$RATE"} >/dev/null
MASTER=$($DDPKIT sim status --name "$NAME" --json |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["cluster"]["nodes"][0]["private_address"])')

common=(--quick --nnodes 2 --master-addr "$MASTER" --master-port "$PORT" --env OMP_NUM_THREADS=1)
$DDPKIT sim exec --name "$NAME" 1 -- $DDPKIT bench "${common[@]}" --node-rank 1 \
  --run-dir "$WORK/node1" --json >"$WORK/node1.json" 2>"$WORK/node1.log" &
WORKER=$!
status=0
$DDPKIT sim exec --name "$NAME" 0 -- $DDPKIT bench "${common[@]}" --node-rank 0 \
  --run-dir "$WORK/node0" --out "$WORK/bench.json" || status=$?
wait "$WORKER" || status=$?
python3 - "$WORK/bench.json" "$WORK/node1.json" <<'CHECK' || status=$?
import json, sys
failed = []
for path in sys.argv[1:]:
    try:
        doc = json.load(open(path))
    except (OSError, ValueError) as exc:
        sys.exit(f"sim-bench: no results in {path}: {exc}")
    failed += [f"{path}: job {j['name']}: {j.get('error_id')}: {j.get('message')}"
               for j in doc.get("jobs", []) if not j.get("ok")]
    failed += [f"{path}: setting {r['setting']}: {r.get('error')}"
               for r in doc.get("scaling", []) if not r.get("ok")]
if failed:
    sys.exit("sim-bench: stages failed:\n  " + "\n  ".join(failed))
print("sim-bench: every stage ran OK on both nodes")
CHECK
if [ "$status" -ne 0 ]; then
  echo "--- node 1 output ---" >&2
  tail -n 40 "$WORK/node1.log" >&2
fi
exit "$status"
