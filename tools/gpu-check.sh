#!/usr/bin/env bash
# The CUDA backend on a GPU machine, in one run of under 10 minutes (issue 8): builds the Release preset
# with CUDA required, runs the CUDA tests (the op harness's CUDA cases, the ONNX node tests on cuda:0, the
# runtime, kernel, NCCL and --device cuda tests), trains the Fashion-MNIST CNN one epoch on cuda:0, and
# benchmarks training samples/s of the ResNet fixture (strict float32, then both sides with TF32; and of
# models/zoo/resnet50.onnx at batch 64 when it has been generated) against PyTorch on the same GPU,
# printing the ratio.
#
#   tools/gpu-check.sh                  # everything; figures also in build/gpu-check/*.txt
#   ONNXTRAIN_JOBS=16 tools/gpu-check.sh
#
# Needs what tools/install-deps.sh installs (it is run when apt works) plus the CUDA toolkit with cuDNN and
# NCCL under /usr/local/cuda; PyTorch with CUDA (python3 -c 'import torch') for the comparison, which is
# skipped with a message when it is missing.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs="${ONNXTRAIN_JOBS:-$(nproc)}"
out=build/gpu-check
mkdir -p "$out"
status=0
step() { echo; echo "== $*"; }
fail() { echo "gpu-check: FAILED: $*"; status=1; }

step "GPU"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv || fail "nvidia-smi: no GPU or driver"

step "build (Release, -DONNXTRAIN_CUDA=ON, -j$jobs)"
if [[ "${ONNXTRAIN_SKIP_DEPS:-}" != 1 ]] && command -v apt-get >/dev/null && apt-get -qq update >/dev/null 2>&1; then
  CI=true tools/install-deps.sh >/dev/null || echo "install-deps failed; building with what is installed"
fi
cmake --preset release -DONNXTRAIN_CUDA=ON >"$out/configure.txt" 2>&1 || { cat "$out/configure.txt"; fail "configure"; exit 1; }
cmake --build --preset release -j "$jobs" >"$out/build.txt" 2>&1 || { tail -40 "$out/build.txt"; fail "build"; exit 1; }
bin=build/release/tools/onnxtrain
"$bin" version

step "CUDA tests"
timeout 300 ctest --test-dir build/release -j 4 --output-on-failure \
  -R 'Cuda|cuda|Nccl|nccl|CachingAllocator|OnnxConformance' >"$out/tests.txt" 2>&1 || fail "CUDA tests"
grep -E "tests passed|tests failed|Failed|Skipped|\*\*\*" "$out/tests.txt" | tail -40
build/release/tests/onnx_conformance_test 2>/dev/null | grep -E "ONNX node tests|on cuda:0|no CUDA device" || true

step "Fashion-MNIST CNN, one epoch on cuda:0"
data=fashion-mnist
[[ -d /usr/share/datasets/fashion-mnist ]] || { data=synthetic:1,28,28:10:60000; echo "(no dataset-fashion-mnist: synthetic data)"; }
timeout 300 "$bin" train models/cnn_opset17.onnx --data "$data" --device cuda --epochs 1 --batch 64 \
  -o "$out/cnn_cuda.onnx" 2>&1 | tee "$out/train_cnn.txt" | grep -E "epoch|test|samples/s|error" || fail "CNN training on cuda"

step "training samples/s against PyTorch on the same GPU"
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  timeout 240 python3 benchmarks/compare_pytorch.py --build build/release --device cuda --models resnet:64,cnn:64 \
    --threads 1 --repeats 3 --json "$out/compare_pytorch.json" | tee "$out/compare_pytorch.txt" || fail "benchmark"
  echo "the same with TF32 tensor cores on both sides (onnxtrain --tf32; torch allow_tf32):"
  timeout 120 python3 benchmarks/compare_pytorch.py --build build/release --device cuda --tf32 --models resnet:64 \
    --threads 1 --repeats 2 --json "$out/compare_pytorch_tf32.json" | tee "$out/compare_pytorch_tf32.txt" || fail "TF32 benchmark"
else
  echo "PyTorch with CUDA not installed (python3 -c 'import torch'): onnxtrain's figures only"
  timeout 120 "$bin" train models/resnet_opset17.onnx --data synthetic:3,32,32:10:6400 --device cuda --batch 64 \
    --epochs 1 --validation 0 --test-data none -o "$out/resnet_cuda.onnx" 2>&1 | grep -E "samples/s" | tail -2
fi
if [[ -f models/zoo/resnet50.onnx ]]; then
  echo "ResNet-50 (models/zoo/resnet50.onnx), batch 64, 20 steps on cuda:0:"
  timeout 180 "$bin" train models/zoo/resnet50.onnx --data synthetic:3,224,224:1000:1280 --device cuda --batch 64 \
    --epochs 1 --validation 0 --test-data none --log-every 5 -o "$out/resnet50_cuda.onnx" 2>&1 | grep -E "samples/s|error" | tail -3
else
  echo "(models/zoo/resnet50.onnx not generated: models/zoo/make_zoo.py makes it)"
fi

step "done"
[[ $status == 0 ]] && echo "gpu-check: all steps passed" || echo "gpu-check: some steps FAILED (see above and $out/)"
exit $status
