#!/usr/bin/env bash
# Quick start, step 1: install the dependencies, build the Release preset (build/release) and run
# onnxtrain on the default model. Honours CI=true (no prompts) and ONNXTRAIN_JOBS (default 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs="${ONNXTRAIN_JOBS:-2}"

tools/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$jobs" --target onnxtrain
build/release/tools/onnxtrain inspect models/cnn_opset17.onnx
