#!/usr/bin/python3
"""Makes the Tile fixtures of tests/pytorch_parity_test.cc: a trained (2, 8) table repeated once per row of
the batch (`p.repeat(batch, 1)`, as DeBERTa-v2 repeats its relative position embeddings), so the Tile's
repeats are known only at run time, exported by both of torch's exporters (torch 2.15), and PyTorch's
first-step loss and parameter gradients for one batch, in float64 and float32.

- tile_ts.onnx, tile_dynamo.onnx: x (batch, 8) -> Linear(8, 8) -> h * p.repeat(batch, 1).view(batch, 2, 8)
  summed over the 2 -> Linear(8, 5). Dynamic batch.
- tile_reference.npz: input, labels (int64), loss64, loss32, and grad64/NAME, grad32/NAME for every
  parameter, NAME its ONNX initializer name.

    VENV/bin/python tests/data/tile/make_tile_exports.py   # writes next to this script
"""
import copy
import os

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


class RepeatByBatch(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.p = nn.Parameter(torch.randn(2, 8))
        self.b = nn.Linear(8, 5)

    def forward(self, x):
        n = x.shape[0]
        tiled = self.p.repeat(n, 1).view(n, 2, 8)
        return self.b((self.a(x).unsqueeze(1) * tiled).sum(1))


def gradients(model, x, labels):
    model.zero_grad()
    loss = F.cross_entropy(model(x), labels)
    loss.backward()
    return loss.item(), {n: p.grad.detach().numpy().copy() for n, p in model.named_parameters()}


if __name__ == "__main__":
    torch.manual_seed(0)
    model = RepeatByBatch()
    x = torch.randn(4, 8)
    labels = torch.tensor([1, 3, 4, 0])
    for name, dynamo in (("tile_ts.onnx", False), ("tile_dynamo.onnx", True)):
        path = os.path.join(HERE, name)
        if dynamo:
            torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["logits"], dynamo=True,
                              optimize=False, dynamic_shapes=({0: torch.export.Dim("batch")},), external_data=False)
        else:
            torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["logits"], dynamo=False,
                              opset_version=17, dynamic_axes={"input": {0: "batch"}}, do_constant_folding=False)
        graph = onnx.load(path).graph
        assert any(n.op_type == "Tile" for n in graph.node), f"{path} has no Tile"
        names = {i.name for i in graph.initializer}
        assert all(n in names for n, _ in model.named_parameters()), f"{path}: {sorted(names)}"
    loss32, g32 = gradients(model, x, labels)
    loss64, g64 = gradients(copy.deepcopy(model).double(), x.double(), labels)
    arrays = {"input": x.numpy(), "labels": labels.numpy(), "loss32": np.array(loss32), "loss64": np.array(loss64)}
    for n in g32:
        arrays["grad32/" + n] = g32[n]
        arrays["grad64/" + n] = g64[n]
    np.savez(os.path.join(HERE, "tile_reference.npz"), **arrays)
    print("loss float32", loss32, "float64", loss64)
