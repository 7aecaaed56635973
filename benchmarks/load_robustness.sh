#!/usr/bin/env bash
# How a 2-thread training run holds up beside a busy process, under each OpenMP wait policy (issue 23:
# "with one busy process beside it, a 2-thread run keeps at least 0.5 of its idle speed").
#
# For each model and policy it trains K steps twice, alone and beside one busy process that this script
# starts itself (a shell busy loop, one core), and prints samples/s over the steps after the first W
# (from --metrics' time_s) and the ratio busy/idle. Policies: onnxtrain's default (tools/openmp_wait_policy.cc
# lowers GOMP_SPINCOUNT unless the user set a policy), libgomp's own default (GOMP_SPINCOUNT=300000),
# OMP_WAIT_POLICY=passive and =active. Run it on an otherwise idle machine (it prints the load first).
#
#   benchmarks/load_robustness.sh [ONNXTRAIN=build/release/tools/onnxtrain] [STEPS=40]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
onnxtrain="${1:-build/release/tools/onnxtrain}"
steps="${2:-40}"
warm=5
work=$(mktemp -d)
busy_pid=""
trap '[[ -n "$busy_pid" ]] && kill "$busy_pid" 2>/dev/null; rm -rf "$work"' EXIT

# samples/s of one run: batch × (steps after the warm-up) / their wall time.
measure() {  # model data batch env...
  local model=$1 data=$2 batch=$3
  shift 3
  env "$@" OMP_NUM_THREADS=2 "$onnxtrain" train "$model" --data "$data" --batch "$batch" --epochs 1 \
    --limit-batches "$steps" --test-data none --validation 0 --metrics "$work/m.jsonl" -o "$work/out.onnx" >/dev/null 2>&1
  python3 - "$work/m.jsonl" "$batch" "$warm" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"step"' in l and '"time_s"' in l]
batch, warm = int(sys.argv[2]), int(sys.argv[3])
t = [r["time_s"] for r in rows]
print("%.1f" % (batch * (len(t) - warm) / (t[-1] - t[warm - 1])))
PY
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; $steps steps, the first $warm untimed"
printf '%-10s %-28s %10s %10s %6s\n' model policy idle busy ratio
for spec in "cnn models/cnn_opset17.onnx synthetic:1,28,28:10:4096 64" \
            "resnet models/resnet_opset17.onnx synthetic:3,32,32:10:2048 32"; do
  read -r name model data batch <<<"$spec"
  for policy in ${POLICIES:-libgomp-default GOMP_SPINCOUNT=10000 GOMP_SPINCOUNT=1000 OMP_WAIT_POLICY=passive}; do
    envs=()
    [[ $policy != libgomp-default ]] && envs=("$policy")
    idle=$(measure "$model" "$data" "$batch" "${envs[@]}")
    bash -c 'while :; do :; done' &
    busy_pid=$!
    busy=$(measure "$model" "$data" "$batch" "${envs[@]}")
    kill "$busy_pid"
    wait "$busy_pid" 2>/dev/null || true
    busy_pid=""
    printf '%-10s %-28s %10s %10s %6.2f\n' "$name" "$policy" "$idle" "$busy" "$(python3 -c "print($busy / $idle)")"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
