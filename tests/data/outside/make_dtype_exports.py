#!/usr/bin/python3
"""Makes the float64 and float16 exports of tests/cli_reliability_test.cc (torch 2.15, TorchScript): a model
exported after model.double() failed at its first step (the data was always float32), and one exported
after model.half() was refused as "the loss must be float32 or float64" with no word of what to do. Both
are now refused before the data is read, saying what to export; eval runs the float64 one.

- mlp_f64_ts.onnx, mlp_f16_ts.onnx: Flatten -> Linear(16, 8) -> ReLU -> Linear(8, 5) on (batch, 1, 4, 4).

    VENV/bin/python tests/data/outside/make_dtype_exports.py   # writes next to this script
"""
import os

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))

if __name__ == "__main__":
    torch.manual_seed(0)
    for dtype, name in ((torch.float64, "mlp_f64_ts.onnx"), (torch.float16, "mlp_f16_ts.onnx")):
        model = nn.Sequential(nn.Flatten(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 5)).to(dtype)
        torch.onnx.export(model, (torch.randn(2, 1, 4, 4, dtype=dtype),), os.path.join(HERE, name), dynamo=False,
                          input_names=["input"], output_names=["logits"], dynamic_axes={"input": {0: "batch"}})
