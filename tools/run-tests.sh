#!/usr/bin/env bash
# Quick start, step 2: install the dependencies, check the format (tools/check-format.sh), build the Release preset and run the whole test suite
# (all but the `bench` label), then build the ASan+UBSan preset and run the same tests under it
# (the `malformed` label feeds hostile model files), then the tests labelled `threads` under TSan, then the
# fuzzers (tools/run-fuzzers.sh --ci: fixed seed and inputs, reproducible; ONNXTRAIN_FUZZ_SECONDS=N explores
# N seconds per target instead).
# This is what CI runs (.ci/run). Honours CI=true (no prompts) and ONNXTRAIN_JOBS (default 2).
# The test presets set OMP_WAIT_POLICY=PASSIVE: with `ctest -j` several OpenMP processes share the cores,
# and threads spinning at barriers would slow the training tests tenfold.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs="${ONNXTRAIN_JOBS:-2}"
# ccache keys on the command line, whose paths are absolute: a clone in another directory would miss the
# whole cache (a cold build is about 75 minutes of this script on 2 cores). Relative to the checkout they hit.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
started=$SECONDS
stage() { echo "== $1 (at $(( (SECONDS - started) / 60 )) min)"; }

tools/install-deps.sh
tools/setup-ort.sh  # ONNX Runtime for the test that deploys a trained model (tests/ort_inference_test.py)

stage "format: clang-format 14 on every C++ and CUDA file"
tools/check-format.sh

stage "release: build and test"
cmake --preset release
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

# The sanitizer presets keep line tables only (-g1): stack traces name file and line, and the objects
# compile about 25% faster and link 2.3x smaller than with full debug information (-g).
# The CUDA code is compiled (nvcc) by the release stage; the sanitizer stages build with CUDA off, which
# also keeps the CUDA-less build (stubs, clear errors for --device cuda) tested.
stage "asan: every test (malformed inputs among them) under AddressSanitizer + UndefinedBehaviorSanitizer"
cmake --preset asan
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$jobs"

# The tsan preset builds without CUDA, so the GPU tests (cuda_pipeline_test, nccl_comm_test) would only skip:
# they are not built here.
stage "tsan: the threaded tests (pipeline stages, replicas, central storage, parameter server, local and tcp comm, the caching allocator) under ThreadSanitizer"
cmake --preset tsan
cmake --build --preset tsan -j "$jobs" --target local_comm_test local_comm_conformance_test tcp_comm_test \
  pipeline_trainer_test pipeline_strategies_test grouped_transport_test data_parallel_test worker_threads_test central_storage_test parameter_server_test \
  caching_allocator_test replica_gradient_sum_test spin_then_wait_test batch_feed_test
ctest --preset tsan -j "$jobs" -L threads

# libFuzzer (clang-14, ASan + UBSan) on the model loader, the dataset readers, the checkpoint and plan readers:
# nine targets, each from its seeds with a fixed libFuzzer seed and number of inputs (about 20 s each), so
# the same commit runs the same inputs on every machine; fails on any crash, sanitizer report, escaping
# exception, leak or huge allocation (tools/run-fuzzers.sh; its build is small: graph/, frontend/ and two readers).
stage "fuzz: libFuzzer on the model loader, dataset readers, checkpoint and plan readers"
if [[ -n "${ONNXTRAIN_FUZZ_SECONDS:-}" ]]; then
  tools/run-fuzzers.sh "$ONNXTRAIN_FUZZ_SECONDS"
else
  tools/run-fuzzers.sh --ci
fi

stage "all tests passed"
command -v ccache >/dev/null && ccache --show-stats | grep -iE "hits|misses" || true
