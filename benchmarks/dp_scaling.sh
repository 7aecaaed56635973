#!/usr/bin/env bash
# Data-parallel scaling on this machine (issue 7): one process (OMP_NUM_THREADS=2, also with
# OMP_WAIT_POLICY=passive, and OMP_NUM_THREADS=1) against
# `mpirun -np 2` dp (OMP_NUM_THREADS=1 per rank), flat and with --bucket-mb, on the mlp and cnn fixtures
# and SqueezeNet 1.1 when models/zoo/squeezenet1_1.onnx exists (models/zoo/make_zoo.py makes it), all
# on synthetic data. Prints per model and configuration: steady-state samples/s, the ratios to one
# process with 2 threads and with 1 thread, the all-reduce ms per step and its share of the step (rank 0's "data
# parallel:" line), and the ring model's prediction for that gradient size,
#   2(R-1)/R * bytes / bandwidth + 2(R-1) * latency,
# with the latency and bandwidth that ring_model_bench fits at the start (its MpiCommunicator fit, and
# in brackets its raw MPI_Send fit). One repeat takes 1-2 minutes (longer when the cores are busy).
#
#   benchmarks/dp_scaling.sh [ONNXTRAIN [RING_MODEL_BENCH]]
#   REPEATS=3 benchmarks/dp_scaling.sh     # each configuration 3 times (interleaved): median [min-max]
#
# ONNXTRAIN defaults to build/release/tools/onnxtrain, else build/tools/onnxtrain; RING_MODEL_BENCH to
# benchmarks/ring_model_bench beside that build (without it the model columns say n/a). Steady state:
# --metrics gives the cumulative samples/s after every step, so step n ends at t_n = n * batch / s_n and
# the rate over the second half of the steps is (n - k) * batch / (t_n - t_k), k = n / 2 (every batch is
# full: --limit-batches stays below the rows / batch). The machine may be shared: run it more than once.
set -euo pipefail

# Paths given are relative to the caller's directory; the script then runs from the repository root.
absolute() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
onnxtrain=${1:+$(absolute "$1")}
ring_bench=${2:+$(absolute "$2")}
cd "$(dirname "$0")/.."
if [[ -z $onnxtrain ]]; then
  for candidate in build/release/tools/onnxtrain build/tools/onnxtrain; do
    if [[ -x $candidate ]]; then onnxtrain=$candidate; break; fi
  done
fi
[[ -n $onnxtrain && -x $onnxtrain ]] || { echo "dp_scaling.sh: no onnxtrain binary (give its path)" >&2; exit 2; }
ring_bench=${ring_bench:-$(dirname "$onnxtrain")/../benchmarks/ring_model_bench}
repeats=${REPEATS:-1}
mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS=1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "onnxtrain: $onnxtrain; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%H:%M:%S) UTC"

# --- the ring model's latency and bandwidth ----------------------------------------------------------
comm_lat='' comm_bw='' mpi_lat='' mpi_bw=''
if [[ -x $ring_bench ]]; then
  "${mpirun[@]}" "$ring_bench" --p2p-kb 4,16,64,256,1024,4096,16384 --reduce-mb 0.2,0.44,4.9 --budget-ms 100 \
    >"$work/ring.txt" 2>&1 || { cat "$work/ring.txt" >&2; exit 1; }
  grep -v '^fit:\|^allreduce:' "$work/ring.txt"
  read -r comm_lat comm_bw mpi_lat mpi_bw < <(awk '/^fit:/ {
      for (i = 2; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] }
      print v["comm_latency_us"], v["comm_bandwidth_GBps"], v["mpi_latency_us"], v["mpi_bandwidth_GBps"] }' "$work/ring.txt") || true
else
  echo "($ring_bench not built: no ring-model column)"
fi

# steady METRICS_FILE BATCH: samples/s over the second half of the steps.
steady() { awk -v b="$2" 'match($0, /"samples_per_s":[0-9.eE+-]+/) {
    s = substr($0, RSTART + 16, RLENGTH - 16)
    if (match($0, /"step":[0-9]+/)) { n = substr($0, RSTART + 7, RLENGTH - 7); t[n] = n * b / s; last = n } }
  END { k = int(last / 2); if (k < 1 || !(k in t)) { print "n/a"; exit }
        printf "%.1f", (last - k) * b / (t[last] - t[k]) }' "$1"; }

# One run: run NAME CONFIG MODEL DATA BATCH LIMIT BUCKET_MB LR; appends a line to $work/runs.txt:
# model config samples/s allreduce_ms share% grad_MB load
run() {
  local name=$1 config=$2 model=$3 data=$4 batch=$5 limit=$6 bucket=$7 lr=$8
  local metrics=$work/$name.$config.jsonl log=$work/$name.$config.log
  local args=(train "$model" -o "$work/out.onnx" --data "$data" --batch "$batch" --limit-batches "$limit"
              --validation 0 --test-data none --lr "$lr" --metrics "$metrics")
  rm -f "$metrics"
  case $config in
    single-2T) OMP_NUM_THREADS=2 "$onnxtrain" "${args[@]}" >"$log" 2>&1 ;;
    # libgomp's idle threads spin by default; passive makes them sleep, which matters when the cores are shared.
    single-2T-passive) OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive "$onnxtrain" "${args[@]}" >"$log" 2>&1 ;;
    single-1T) OMP_NUM_THREADS=1 "$onnxtrain" "${args[@]}" >"$log" 2>&1 ;;
    dp2-flat) "${mpirun[@]}" "$onnxtrain" "${args[@]}" --strategy dp >"$log" 2>&1 ;;
    dp2-bucket*) "${mpirun[@]}" "$onnxtrain" "${args[@]}" --strategy dp --bucket-mb "$bucket" >"$log" 2>&1 ;;
  esac || { echo "dp_scaling.sh: $name $config failed:" >&2; cat "$log" >&2; exit 1; }
  local sps reduce load
  load=$(cut -d' ' -f1 /proc/loadavg)  # sampled after the run: the contention it saw, our own processes included
  sps=$(steady "$metrics" "$batch")
  # "data parallel: 2 replicas, X ms per step, gradient all-reduce Y ms per step [not overlapped ](Z% of the step, B MB ..."
  reduce=$(awk '/^data parallel:/ { for (i = 1; i <= NF; ++i) {
        if ($i == "all-reduce") ms = $(i + 1)
        if ($i ~ /^\(?[0-9.]+%$/) { share = $i; gsub(/[(%]/, "", share) }
        if ($i == "MB" && mb == "") mb = $(i - 1) } }
      END { if (ms == "") print "- - -"; else print ms, share, mb }' "$log")
  echo "$name $config $sps $reduce $load" >>"$work/runs.txt"
}

# name model data batch limit bucket-MB lr: mlp and cnn on 28x28 images (0.5 and 3 ms a step alone,
# so hundreds of steps), SqueezeNet on 224x224 (~0.3 s a step at batch 16).
models=(
  "mlp models/mlp_opset17.onnx synthetic:1,28,28:10:76800 64 1200 0.1 0.01"
  "cnn models/cnn_opset17.onnx synthetic:1,28,28:10:19200 64 300 0.05 0.01"
)
if [[ -f models/zoo/squeezenet1_1.onnx ]]; then
  models+=("squeezenet models/zoo/squeezenet1_1.onnx synthetic:3,224,224:10:320 16 20 1 0.001")
else
  echo "(models/zoo/squeezenet1_1.onnx absent: python3 models/zoo/make_zoo.py makes it)"
fi

: >"$work/runs.txt"
for ((r = 1; r <= repeats; ++r)); do
  for m in "${models[@]}"; do
    read -r name model data batch limit bucket lr <<<"$m"
    for config in single-2T single-2T-passive single-1T dp2-flat "dp2-bucket$bucket"; do
      run "$name" "$config" "$model" "$data" "$batch" "$limit" "$bucket" "$lr"
    done
  done
done

# --- the table: medians over the repeats, [min-max] of samples/s when repeated -----------------------
echo
echo "steady-state samples/s (second half of the steps), ${repeats} run(s) each; x 2T, x 1T: ratio to one process with 2 threads, 1 thread"
printf "%-11s %-17s %-22s %6s %6s %12s %7s %9s %20s %6s\n" model configuration samples/s "x 2T" "x 1T" "allreduce ms" share "grad MB" \
  "ring model ms" load
awk -v comm_lat="$comm_lat" -v comm_bw="$comm_bw" -v mpi_lat="$mpi_lat" -v mpi_bw="$mpi_bw" '
  function median(list,   n, a, i, j, x) {
    n = split(list, a, " ")
    for (i = 2; i <= n; ++i) { x = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > x + 0; --j) a[j + 1] = a[j]; a[j + 1] = x }
    lo = a[1]; hi = a[n]
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function ratio(s, b) { return b > 0 ? sprintf("%.2f", s / b) : "n/a" }
  function ring(mb, lat, bw) { return (lat == "" || mb == "-") ? "n/a" : sprintf("%.3f", (mb * 1e6 / (bw * 1e9) + 2 * lat * 1e-6) * 1e3) }
  { key = $1 " " $2; if (!(key in sps)) order[++count] = key
    sps[key] = sps[key] " " $3; ms[key] = ms[key] " " $4; share[key] = share[key] " " $5; mb[key] = $6; load[key] = load[key] " " $7 }
  END {
    for (i = 1; i <= count; ++i) {  # the baselines first: every row of a model is divided by them
      key = order[i]; split(key, k, " ")
      if (k[2] == "single-2T") base2[k[1]] = median(sps[key])
      if (k[2] == "single-1T") base1[k[1]] = median(sps[key])
    }
    for (i = 1; i <= count; ++i) {
      key = order[i]; split(key, k, " ")
      s = median(sps[key]); range = (lo != hi) ? sprintf(" [%.0f-%.0f]", lo, hi) : ""
      if (mb[key] == "-") { m = "-"; sh = "-"; model = "-" }
      else { m = sprintf("%.2f", median(ms[key])); sh = sprintf("%.1f%%", median(share[key]))
             model = ring(mb[key], comm_lat, comm_bw) " (" ring(mb[key], mpi_lat, mpi_bw) ")" }
      printf "%-11s %-17s %-22s %6s %6s %12s %7s %9s %20s %6.1f\n", k[1], k[2], sprintf("%.0f%s", s, range),
             ratio(s, base2[k[1]]), ratio(s, base1[k[1]]), m, sh, mb[key], model, median(load[key])
    }
  }' "$work/runs.txt"
echo "ring model: 2(R-1)/R * bytes / bandwidth + 2(R-1) * latency, R = 2, MpiCommunicator fit (raw MPI_Send fit);"
echo "allreduce ms with buckets is only the part not overlapped with the backward pass; load: median 1-minute load"
echo "average right after the run (this script's own processes included; more than $(nproc) means the runs shared the cores)."
