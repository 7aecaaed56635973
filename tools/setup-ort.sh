#!/usr/bin/env bash
# Makes build/ort-venv: a Python virtual environment with ONNX Runtime, NumPy and TensorBoard from the Python
# package index, for the tests that run onnxtrain's written models in ONNX Runtime (tests/ort_inference_test.py)
# and read its event files with TensorBoard's own reader (tests/tensorboard_reader_test.py).
# onnxtrain itself never needs Python. Idempotent: does nothing when the environment already imports both.
#
#   tools/setup-ort.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=build/ort-venv
ort_version=1.31.1
tensorboard_version=2.21.0
if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "import numpy, onnxruntime, tensorboard" 2>/dev/null; then
  echo "setup-ort: $venv has onnxruntime $("$venv/bin/python" -c 'import onnxruntime; print(onnxruntime.__version__)')"
  exit 0
fi
mkdir -p build
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "onnxruntime==$ort_version" numpy "tensorboard==$tensorboard_version"
echo "setup-ort: installed onnxruntime $ort_version and tensorboard $tensorboard_version into $venv"
