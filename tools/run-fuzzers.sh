#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, the `fuzz` preset: clang-14, ASan + UBSan), makes their seed corpora
# (fuzz/make_corpus.py, in build/fuzz/corpus) and runs each target for SECONDS (default 30). Prints per
# target the inputs run, exec/s, the corpus size (files) and the coverage (libFuzzer's final "cov:"), and
# exits 1 when any target had a finding: a crash, a sanitizer report, an exception other than
# onnxtrain::Error escaping (fuzz/fuzz_input.h), a leak, an input slower than 30 s, more than 2 GB of
# memory, or one allocation over 512 MB. The input that caused it is saved in build/fuzz/findings/TARGET/
# and the report is in build/fuzz/logs/TARGET.log; reproduce with build/fuzz/fuzz/TARGET FILE.
#
#   tools/run-fuzzers.sh              # every target, 30 s each (tools/run-tests.sh's fuzz stage)
#   tools/run-fuzzers.sh 300 fuzz_npz # one target, five minutes
#
# Honours ONNXTRAIN_JOBS (build jobs, default 2). New inputs that reach new code stay in the corpus, so a
# kept build/fuzz starts where the last run stopped.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds="${1:-30}"
[[ $# -gt 0 ]] && shift
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
  echo "usage: tools/run-fuzzers.sh [SECONDS] [TARGET...]" >&2
  exit 2
fi
all_targets=(fuzz_model_bytes fuzz_model_proto fuzz_npy fuzz_npz fuzz_idx fuzz_cifar fuzz_tokens fuzz_checkpoint fuzz_plan)
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=("${all_targets[@]}")
jobs="${ONNXTRAIN_JOBS:-2}"
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
build=build/fuzz
started=$SECONDS

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$jobs"
echo "run-fuzzers: built in $((SECONDS - started)) s"
python3 fuzz/make_corpus.py "$build/corpus"

export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
failed=()
printf '%-18s %6s %10s %7s %8s %6s  %s\n' target seconds execs exec/s "corpus" cov result
for t in "${targets[@]}"; do
  binary="$build/fuzz/$t"
  [[ -x "$binary" ]] || { echo "run-fuzzers: no target $t (known: ${all_targets[*]})" >&2; exit 2; }
  log="$build/logs/$t.log"
  mkdir -p "$build/logs" "$build/findings/$t" "$build/corpus/$t"
  dict=()
  [[ -f "fuzz/$t.dict" ]] && dict=("-dict=fuzz/$t.dict")
  [[ $t == fuzz_tokens ]] && dict=("-dict=fuzz/fuzz_npy.dict")  # .npy token files
  rc=0
  "$binary" "$build/corpus/$t" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -malloc_limit_mb=512 \
    -print_final_stats=1 -artifact_prefix="$build/findings/$t/" "${dict[@]}" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  files=$(find "$build/corpus/$t" -type f | wc -l)
  result=ok
  [[ $rc -ne 0 ]] && { result="FINDING (exit $rc)"; failed+=("$t"); }
  printf '%-18s %6s %10s %7s %8s %6s  %s\n' "$t" "$seconds" "${execs:-?}" "${speed:-?}" "$files" "${cov:-?}" "$result"
done

for t in "${failed[@]}"; do
  echo
  echo "== $t: the end of $build/logs/$t.log; inputs in $build/findings/$t/"
  grep -v -E '^(#[0-9]+|INFO:|stat::)' "$build/logs/$t.log" | tail -40
done
echo "run-fuzzers: $((SECONDS - started)) s in all"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "run-fuzzers: findings in ${failed[*]}" >&2
  exit 1
fi
