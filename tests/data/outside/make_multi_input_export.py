#!/usr/bin/python3
"""Makes the multi-input fixture of tests/cli_reliability_test.cc: a model with a bool mask and a per-sample
int64 index beside its float features, as torch 2.15's TorchScript exporter writes it, and npz data for it.
A fifth outside check (2026-12-06) found such models refused from npz: the rank-1 index as "expected
(N, T)", the bool mask as "expected uint8 ... or float32".

- multi_input_ts.onnx: logits = Linear(4, 3)(x * mask) + Embedding(10, 3)(idx); inputs x float32 (N, 4),
  idx int64 (N), mask bool (N, 4); dynamic batch.
- multi_input.npz: 96 rows of x, idx, mask (numpy bool) and labels (the argmax of a fixed linear map of
  x * mask plus a per-index offset, so that both extra inputs matter); multi_input_float_mask.npz the
  same with the mask as float32, which the model's bool input refuses.

    VENV/bin/python tests/data/outside/make_multi_input_export.py   # writes next to this script
"""
import os

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


class MultiInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.emb = nn.Linear(4, 3), nn.Embedding(10, 3)

    def forward(self, x, idx, mask):
        return self.fc(x * mask.float()) + self.emb(idx)


if __name__ == "__main__":
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((96, 4)).astype(np.float32)
    idx = rng.integers(0, 10, 96).astype(np.int64)
    mask = rng.random((96, 4)) > 0.3
    labels = ((x * mask) @ rng.standard_normal((4, 3)) + rng.standard_normal((10, 3))[idx]).argmax(1).astype(np.int64)
    np.savez(os.path.join(HERE, "multi_input.npz"), x=x, idx=idx, mask=mask, labels=labels)
    np.savez(os.path.join(HERE, "multi_input_float_mask.npz"), x=x, idx=idx, mask=mask.astype(np.float32), labels=labels)
    example = (torch.from_numpy(x[:2]), torch.from_numpy(idx[:2]), torch.from_numpy(mask[:2]))
    torch.onnx.export(MultiInput(), example, os.path.join(HERE, "multi_input_ts.onnx"), dynamo=False,
                      input_names=["x", "idx", "mask"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "idx": {0: "batch"}, "mask": {0: "batch"}})
