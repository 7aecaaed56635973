#!/work/venv/torchnew/bin/python
"""Reference outputs from ONNX Runtime for `onnxtrain run` tests: for each fixture below, a seeded
input batch (NAME_input.npy) and ONNX Runtime's logits on it (NAME_logits.npy).

Run with a Python that has numpy and onnxruntime (the fixture venv: models/make_fixtures.py):
    models/expected/make_expected.py
Only BatchNorm-free, Dropout-free fixtures: training-mode BN and Dropout are not inference ops in ORT.
"""
import os

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.dirname(HERE)
FIXTURES = ["cnn_opset13", "cnn_opset17", "cnn_dynamo", "mlp_opset17", "mlp_dynamo"]


def main():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 1, 28, 28), dtype=np.float32)
    np.save(os.path.join(HERE, "fashion_batch3_input.npy"), x)
    for name in FIXTURES:
        session = ort.InferenceSession(os.path.join(MODELS, name + ".onnx"), providers=["CPUExecutionProvider"])
        (logits,) = session.run(None, {session.get_inputs()[0].name: x})
        np.save(os.path.join(HERE, name + "_logits.npy"), logits)
        print("%-14s logits %s, onnxruntime %s" % (name, logits.shape, ort.__version__))


if __name__ == "__main__":
    main()
