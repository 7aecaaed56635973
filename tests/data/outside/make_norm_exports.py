#!/usr/bin/python3
"""Makes the normalisation exports of tests/frontend_test.cc and tests/cli_reliability_test.cc, as torch's
TorchScript exporter writes them (torch 2.15, dynamo=False): the ones and zeros of a norm without affine
parameters come out as Constant nodes, which PyTorch does not train. An outside check of 2026-12-06 found
onnxtrain training them, then failing to write the model after the last epoch.

- ln_noaff_ts.onnx: Linear(16, 32), LayerNorm(32, elementwise_affine=False), Linear(32, 5); eval mode.
- bn_noaff_ts_train.onnx: Conv2d(3, 8, 3, padding=1), BatchNorm2d(8, affine=False), mean over H, W,
  Linear(8, 10); exported in training mode.
- gn_ts.onnx: Conv2d(3, 8, 3, padding=1), GroupNorm(2, 8), mean over H, W, Linear(8, 10) (InstanceNorm
  on Constant ones and zeros, then GroupNorm's own weight and bias).
Each prints its parameter count in PyTorch, which the tests expect.

    VENV/bin/python tests/data/outside/make_norm_exports.py   # writes next to this script
"""
import os

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


class LayerNormNoAffine(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.n, self.f = nn.Linear(16, 32), nn.LayerNorm(32, elementwise_affine=False), nn.Linear(32, 5)

    def forward(self, x):
        return self.f(self.n(self.a(x)))


class ConvNorm(nn.Module):
    def __init__(self, norm):
        super().__init__()
        self.c, self.n, self.f = nn.Conv2d(3, 8, 3, padding=1), norm, nn.Linear(8, 10)

    def forward(self, x):
        return self.f(self.n(self.c(x)).mean((2, 3)))


def export(model, x, name, training):
    model.train(training)
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    torch.onnx.export(model, (x,), os.path.join(HERE, name), input_names=["input"], dynamic_axes={"input": {0: "batch"}},
                      dynamo=False, training=mode)
    print(name, "parameters in torch:", sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    torch.manual_seed(0)
    export(LayerNormNoAffine(), torch.randn(2, 16), "ln_noaff_ts.onnx", False)
    export(ConvNorm(nn.BatchNorm2d(8, affine=False)), torch.randn(2, 3, 32, 32), "bn_noaff_ts_train.onnx", True)
    export(ConvNorm(nn.GroupNorm(2, 8)), torch.randn(2, 3, 32, 32), "gn_ts.onnx", False)
