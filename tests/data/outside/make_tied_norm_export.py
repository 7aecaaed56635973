#!/usr/bin/python3
"""Makes ln_tied_dynamo.onnx for tests/cli_reliability_test.cc: Linear(8, 8) -> LayerNorm(8) -> Linear(8, 8)
-> LayerNorm(8) -> Linear(8, 3), fresh, exported by torch 2.15's dynamo exporter with its default
optimize=True, which merges the two LayerNorms' equal initial weights (ones) and biases (zeros) into n1's:
both LayerNormalization nodes read n1.weight and n1.bias, so the model would train them tied, where
PyTorch's layers have their own. (With optimize=False each keeps its own; the script checks both.)

    VENV/bin/python tests/data/outside/make_tied_norm_export.py   # writes next to this script
"""
import os
import tempfile

import onnx
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


class TwoNorms(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.n1, self.b = nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 8)
        self.n2, self.f = nn.LayerNorm(8), nn.Linear(8, 3)

    def forward(self, x):
        return self.f(self.n2(self.b(self.n1(self.a(x)))))


def norm_inputs(path):
    return [list(n.input[1:]) for n in onnx.load(path).graph.node if n.op_type == "LayerNormalization"]


if __name__ == "__main__":
    torch.manual_seed(0)
    model, x = TwoNorms(), (torch.randn(2, 8),)
    batch = ({0: torch.export.Dim("batch")},)
    path = os.path.join(HERE, "ln_tied_dynamo.onnx")
    torch.onnx.export(model, x, path, dynamo=True, dynamic_shapes=batch, input_names=["input"], external_data=False)
    assert norm_inputs(path) == [["n1.weight", "n1.bias"]] * 2, norm_inputs(path)
    with tempfile.TemporaryDirectory() as scratch:
        separate = os.path.join(scratch, "separate.onnx")
        torch.onnx.export(model, x, separate, dynamo=True, optimize=False, dynamic_shapes=batch, external_data=False)
        assert norm_inputs(separate) == [["n1.weight", "n1.bias"], ["n2.weight", "n2.bias"]], norm_inputs(separate)
