"""Makes embedding_padding_ts.onnx: nn.Embedding(50, 16, padding_idx=0), a mean over the 12 tokens and a
Linear to 10 classes, exported by TorchScript (opset 17, dynamic batch), and embedding_padding.npz (64 rows
of `input_ids`, the first 3 tokens of each the padding id 0, and `labels`). The export keeps the zeroed
row 0 of the table but not padding_idx: PyTorch gives that row no gradient, onnxtrain cannot know to (an
outside check), and `train` warns.

Run with a Python that has torch: python make_padding_embedding_export.py
"""
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


class PaddedBag(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.e = torch.nn.Embedding(50, 16, padding_idx=0)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, input_ids):
        return self.fc(self.e(input_ids).mean(1))


torch.manual_seed(0)
ids = torch.randint(1, 50, (64, 12))
ids[:, :3] = 0
torch.onnx.export(PaddedBag(), (ids[:8],), os.path.join(HERE, "embedding_padding_ts.onnx"), dynamo=False,
                  opset_version=17, input_names=["input_ids"], output_names=["logits"],
                  dynamic_axes={"input_ids": {0: "batch"}}, do_constant_folding=False)
np.savez(os.path.join(HERE, "embedding_padding.npz"), input_ids=ids.numpy(),
         labels=torch.randint(0, 10, (64,)).numpy())
