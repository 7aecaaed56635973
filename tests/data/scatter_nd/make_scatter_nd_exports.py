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
import copy
import os

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


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


def gradients(model, x, labels):
    model.zero_grad()
    loss = F.cross_entropy(model(x), labels)
    loss.backward()
    return loss.item(), {n: p.grad.detach().numpy().copy() for n, p in model.named_parameters()}


if __name__ == "__main__":
    torch.manual_seed(0)
    model = SliceAssign()
    x = torch.randn(4, 6, 8)
    labels = torch.tensor([1, 3, 4, 9])
    for name, dynamo in (("scatter_nd_ts.onnx", False), ("scatter_nd_dynamo.onnx", True)):
        path = os.path.join(HERE, name)
        if dynamo:
            torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["logits"], dynamo=True,
                              optimize=False, dynamic_shapes=({0: torch.export.Dim("batch")},), external_data=False)
        else:
            torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["logits"], dynamo=False,
                              opset_version=17, dynamic_axes={"input": {0: "batch"}}, do_constant_folding=False,
                              training=torch.onnx.TrainingMode.TRAINING)
        graph = onnx.load(path).graph
        assert any(n.op_type == "ScatterND" for n in graph.node), f"{path} has no ScatterND"
        names = {i.name for i in graph.initializer}
        assert all(n in names for n, _ in model.named_parameters()), f"{path}: {sorted(names)}"
    loss32, g32 = gradients(model, x, labels)
    loss64, g64 = gradients(copy.deepcopy(model).double(), x.double(), labels)
    arrays = {"input": x.numpy(), "labels": labels.numpy(), "loss32": np.array(loss32), "loss64": np.array(loss64)}
    for n in g32:
        arrays["grad32/" + n] = g32[n]
        arrays["grad64/" + n] = g64[n]
    np.savez(os.path.join(HERE, "scatter_nd_reference.npz"), **arrays)
    print("loss float32", loss32, "float64", loss64)
