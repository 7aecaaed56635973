#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, the `fuzz` preset: clang-14, ASan + UBSan), makes their seed corpora
# (fuzz/make_corpus.py) and runs each target. Prints per target the inputs run, exec/s, the corpus size
# (files) and the coverage (libFuzzer's final "cov:"), and exits 1 when any target had a finding: a crash, a
# sanitizer report, an exception other than onnxtrain::Error escaping (fuzz/fuzz_input.h), a leak, an input
# slower than 30 s, more than 2 GB of memory, or one allocation over 512 MB. The input that caused it is
# saved in build/fuzz/findings/TARGET/ and the report is in build/fuzz/logs/TARGET.log; reproduce with
# build/fuzz/fuzz/TARGET FILE.
#
#   tools/run-fuzzers.sh --ci             # the gating run (tools/run-tests.sh's fuzz stage), reproducible
#   tools/run-fuzzers.sh 300 fuzz_npz     # explore: one target for five minutes
#
# --ci starts every target from the seeds alone (build/fuzz/ci-corpus, emptied first), with libFuzzer's
# -seed=1 and a fixed number of inputs per target (about 20 s each on the 2-core CI machine). The same
# commit then runs the same inputs here and in CI: a finding CI would report shows up in this command
# before a push, not by chance in a later landing. A time-boxed run (SECONDS, default 30) explores instead:
# a random seed and the kept corpus build/fuzz/corpus, where new inputs that reach new code stay, so the
# next run starts where the last one stopped. Run that for minutes per target to find what --ci does not.
#
# Honours ONNXTRAIN_JOBS (build jobs, default 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode=explore seconds=30
if [[ "${1:-}" == --ci ]]; then
  mode=ci
  shift
elif [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
if [[ $mode == explore && "$seconds" -lt 1 ]] || [[ "${1:-}" == -* ]]; then
  echo "usage: tools/run-fuzzers.sh [--ci | SECONDS] [TARGET...]" >&2
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
corpus=$build/corpus
if [[ $mode == ci ]]; then
  corpus=$build/ci-corpus
  rm -rf "$corpus"
fi
python3 fuzz/make_corpus.py "$corpus"

# --ci: inputs per target, about 20 s each at the exec/s the CI machine measured from the seeds
# (2026-12-02). A safety cap of 120 s per target keeps a much slower machine bounded.
declare -A ci_runs=([fuzz_model_bytes]=3000 [fuzz_model_proto]=1000 [fuzz_npy]=3000 [fuzz_npz]=25000
  [fuzz_idx]=50000 [fuzz_cifar]=40000 [fuzz_tokens]=7000 [fuzz_checkpoint]=50000 [fuzz_plan]=30000)
export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
failed=()
printf '%-18s %6s %10s %7s %8s %6s  %s\n' target seconds inputs exec/s "corpus" cov result
for t in "${targets[@]}"; do
  binary="$build/fuzz/$t"
  [[ -x "$binary" ]] || { echo "run-fuzzers: no target $t (known: ${all_targets[*]})" >&2; exit 2; }
  log="$build/logs/$t.log"
  mkdir -p "$build/logs" "$build/findings/$t" "$corpus/$t"
  dict=()
  [[ -f "fuzz/$t.dict" ]] && dict=("-dict=fuzz/$t.dict")
  [[ $t == fuzz_tokens ]] && dict=("-dict=fuzz/fuzz_npy.dict")  # .npy token files
  budget=(-max_total_time="$seconds")
  [[ $mode == ci ]] && budget=(-seed=1 -runs="${ci_runs[$t]}" -max_total_time=120)
  rc=0
  target_started=$SECONDS
  "$binary" "$corpus/$t" "${budget[@]}" -timeout=30 -rss_limit_mb=2048 -malloc_limit_mb=512 \
    -print_final_stats=1 -artifact_prefix="$build/findings/$t/" "${dict[@]}" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  files=$(find "$corpus/$t" -type f | wc -l)
  result=ok
  [[ $rc -ne 0 ]] && { result="FINDING (exit $rc)"; failed+=("$t"); }
  printf '%-18s %6s %10s %7s %8s %6s  %s\n' "$t" "$((SECONDS - target_started))" "${execs:-?}" "${speed:-?}" "$files" "${cov:-?}" "$result"
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
