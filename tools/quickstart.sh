#!/usr/bin/env bash
# Quick start, step 1: install the dependencies, build the Release preset (build/release), look at the
# default model and train it three Fashion-MNIST epochs to 90% test accuracy. Honours CI=true (no
# prompts) and ONNXTRAIN_JOBS (default 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs="${ONNXTRAIN_JOBS:-2}"

tools/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$jobs" --target onnxtrain
build/release/tools/onnxtrain inspect models/cnn_opset17.onnx
# Three epochs on all 60000 training images, then the 10000 test images (the accuracy after each epoch).
time build/release/tools/onnxtrain train models/cnn_opset17.onnx --data fashion-mnist --epochs 3 --batch 32 \
  --optimizer nesterov --lr 0.04 --schedule cosine --weight-decay 0.0005 --validation 0 \
  -o build/quickstart/cnn_fashion.onnx
