#!/usr/bin/python3
"""Makes the ScatterND fixtures of tests/pytorch_parity_test.cc: slice assignment into an activation, which both
of torch's exporters (torch 2.15) write as ScatterND (Swin V2's attention masks are built so), and
PyTorch's first-step loss and parameter gradients for one batch, in float64 and float32.

- scatter_nd_ts.onnx, scatter_nd_dynamo.onnx: x (batch, 6, 8) -> Linear(8, 16) -> h[:, 1:4] = 2 * p
  (a trained (3, 16) parameter over three of the six rows) -> tanh -> Linear(16, 10) -> mean over rows.
  Dynamic batch.
- scatter_nd_reference.npz: input, labels (int64), loss64, loss32, and grad64/NAME, grad32/NAME for every
  parameter, NAME its ONNX initializer name.

    VENV/bin/python tests/data/scatter_nd/make_scatter_nd_exports.py   # writes next to this script
"""
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from pytorch_reference import export_both, write_reference  # noqa: E402


class SliceAssign(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 16)
        self.p = nn.Parameter(torch.randn(3, 16))
        self.b = nn.Linear(16, 10)

    def forward(self, x):
        h = self.a(x).clone()
        h[:, 1:4] = self.p.expand(h.shape[0], 3, 16) * 2
        return self.b(torch.tanh(h)).mean(1)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = SliceAssign()
    x = torch.randn(4, 6, 8)
    export_both(model, x, HERE, "scatter_nd", "ScatterND", do_constant_folding=False,
                training=torch.onnx.TrainingMode.TRAINING)
    write_reference(os.path.join(HERE, "scatter_nd_reference.npz"), model, x, torch.tensor([1, 3, 4, 9]))
