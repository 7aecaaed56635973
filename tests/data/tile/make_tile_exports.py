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
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from pytorch_reference import export_both, write_reference  # noqa: E402


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


if __name__ == "__main__":
    torch.manual_seed(0)
    model = RepeatByBatch()
    x = torch.randn(4, 8)
    export_both(model, x, HERE, "tile", "Tile", do_constant_folding=False)
    write_reference(os.path.join(HERE, "tile_reference.npz"), model, x, torch.tensor([1, 3, 4, 0]))
