"""Makes chunk_last_dynamo.onnx: torch.chunk(3, dim=-1) exported by the dynamo exporter (opset 20), which
writes SplitToSequence(axis=-1, split=8) and three SequenceAt. Phi-3's fused query/key/value projection and
MaxViT's attention split this way; an outside check found the chain left unimported (the negative axis
needed a shape that Debian's ONNX library cannot infer at opset 20). Also writes chunk_last_expected.npz:
an input `x` and PyTorch's output `logits` for it. And chunk_uneven_dynamo.onnx with
chunk_uneven_expected.npz: torch.chunk(3, -1) of 10 features, chunks of 4, 4 and 2 (a second outside check
found the last chunk made as long as the others).

Run with a Python that has torch 2.x and onnxscript: python make_chunk_export.py
"""
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


class ChunkLast(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(8, 24)
        self.out = torch.nn.Linear(8, 10)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, -1)
        return self.out(q * k + v)


class ChunkUneven(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(8, 10)
        self.out = torch.nn.Linear(2, 10)

    def forward(self, x):
        a, b, c = self.qkv(x).chunk(3, -1)  # 4, 4, 2
        return self.out(a[:, :2] * b[:, 2:] + c)


torch.manual_seed(0)
x = torch.randn(4, 8)
for name, model in (("chunk_last", ChunkLast().eval()), ("chunk_uneven", ChunkUneven().eval())):
    torch.onnx.export(model, (x,), os.path.join(HERE, name + "_dynamo.onnx"), dynamo=True, optimize=False,
                      input_names=["x"], output_names=["logits"], dynamic_shapes={"x": {0: torch.export.Dim("batch")}},
                      external_data=False)
    with torch.no_grad():
        np.savez(os.path.join(HERE, name + "_expected.npz"), x=x.numpy(), logits=model(x).numpy())
