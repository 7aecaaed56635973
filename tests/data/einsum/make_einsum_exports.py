#!/usr/bin/python3
"""Makes the Einsum fixtures of tests/einsum_test.cc: a small attention block written with torch.einsum the
ways models write it (MaxViT's and hand-written attention), exported by both of torch's exporters (torch
2.15), and PyTorch's first-step loss and parameter gradients for one batch, in float64 and float32 (the
test holds onnxtrain to 10x PyTorch's own float32 error).

- einsum_ts.onnx, einsum_dynamo.onnx: x (batch, 6, 8) -> q, k, v = einsum("btc,hcd->bhtd", x, W) for three
  (2, 8, 4) weights (two heads) -> scores einsum("bhqd,bhkd->bhqk") / 2 -> softmax -> einsum("bhqk,bhkd->bhqd")
  -> einsum("bhtd,hdc->btc", ., Wo) (8 wide: a contraction over two labels) -> einsum("btc->bc") (a sum)
  -> einsum("bc,cn->bn", ., Wc) + bias: 5 logits. Dynamic batch.
- einsum_diagonal.onnx: one Einsum "ii->i" (a diagonal), which onnxtrain refuses by name (onnx.helper).
- einsum_reference.npz: input, labels (int64), loss64, loss32, and grad64/NAME, grad32/NAME for every
  parameter, NAME its ONNX initializer name (the script checks both exports name them as PyTorch does).

    VENV/bin/python tests/data/einsum/make_einsum_exports.py   # writes next to this script
"""
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from pytorch_reference import export_both, write_reference  # noqa: E402


class EinsumAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.wq, self.wk, self.wv = (nn.Parameter(torch.randn(2, 8, 4) * 0.3) for _ in range(3))
        self.wo = nn.Parameter(torch.randn(2, 4, 8) * 0.3)
        self.wc = nn.Parameter(torch.randn(8, 5) * 0.3)
        self.bias = nn.Parameter(torch.zeros(5))

    def forward(self, x):
        q, k, v = (torch.einsum("btc,hcd->bhtd", x, w) for w in (self.wq, self.wk, self.wv))
        p = torch.softmax(torch.einsum("bhqd,bhkd->bhqk", q, k) / 2, dim=-1)
        o = torch.einsum("bhtd,hdc->btc", torch.einsum("bhqk,bhkd->bhqd", p, v), self.wo)
        return torch.einsum("bc,cn->bn", torch.einsum("btc->bc", o), self.wc) + self.bias


def write_diagonal_model():
    import onnx
    from onnx import TensorProto, helper
    node = helper.make_node("Einsum", ["x"], ["y"], name="diagonal", equation="ii->i")
    graph = helper.make_graph([node], "diagonal", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              os.path.join(HERE, "einsum_diagonal.onnx"))


if __name__ == "__main__":
    torch.manual_seed(0)
    model = EinsumAttention()
    x = torch.randn(3, 6, 8)
    export_both(model, x, HERE, "einsum", "Einsum")
    write_reference(os.path.join(HERE, "einsum_reference.npz"), model, x, torch.tensor([1, 3, 4]))
    write_diagonal_model()
