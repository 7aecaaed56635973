#!/usr/bin/python3
"""tools/plot_metrics.py on the --metrics files of two short `onnxtrain train` runs: it writes a PNG with
the loss, validation accuracy and lr panels, and refuses a file that is not a metrics file (exit 1, naming
it). Registered in tests/CMakeLists.txt (plot_metrics_test)."""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PLOT = os.path.join(HERE, "..", "tools", "plot_metrics.py")
MODEL = os.path.join(HERE, "..", "models", "mlp_opset17.onnx")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--onnxtrain", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        metrics = []
        for name, schedule in (("cosine", "cosine"), ("constant", "constant")):
            path = os.path.join(tmp, name + ".jsonl")
            subprocess.run([args.onnxtrain, "train", MODEL, "--data", "synthetic:1,28,28:10:256", "--epochs", "2",
                            "--test-data", "none", "--schedule", schedule, "--metrics", path,
                            "-o", os.path.join(tmp, name + ".onnx")], check=True, capture_output=True)
            metrics.append(path)
        png = os.path.join(tmp, "curves.png")
        done = subprocess.run([PLOT, *metrics, "--out", png, "--smooth", "2"],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert "2 runs: loss, accuracy, lr" in done.stdout, done.stdout
        with open(png, "rb") as f:
            data = f.read()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
        assert len(data) > 20000, "a PNG of three panels with curves is larger than %d bytes" % len(data)
        bad = subprocess.run([PLOT, os.path.join(tmp, "cosine.onnx"), "--out", png],
                             capture_output=True, text=True)
        assert bad.returncode == 1, bad
        assert "cosine.onnx: not text" in bad.stderr, bad.stderr
    print("plot_metrics_test: ok")


if __name__ == "__main__":
    main()
