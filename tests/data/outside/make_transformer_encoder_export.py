"""Makes transformer_encoder_ts.onnx: nn.TransformerEncoder of 2 layers (d_model 16, 2 heads, feed-forward 32,
no dropout, batch-first), the mean over 12 positions into Linear(16, 6), exported by TorchScript (opset 17,
batch dynamic, without constant folding).

nn.TransformerEncoder deep-copies its layer, so both layers start equal, and TorchScript's export merges
equal initializers: the file has one in_proj_weight, out_proj.weight, linear1 and linear2 for both layers
(11 initializers; the dynamo exporter with optimize=False writes 26). Trained as exported, the two layers stay
one (an outside check of 2026-12-07 found it when the pipelines refused to split the tied layers).
`train` warns before it trains (tests/cli_reliability_test.cc).

Run with a Python that has torch and onnx: python make_transformer_encoder_export.py
"""
import os
import warnings

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.fc = nn.Linear(16, 6)

    def forward(self, x):
        return self.fc(self.enc(x).mean(1))


torch.manual_seed(0)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.onnx.export(Encoder(), (torch.randn(4, 12, 16),), os.path.join(HERE, "transformer_encoder_ts.onnx"),
                      dynamo=False, opset_version=17, do_constant_folding=False, input_names=["x"],
                      output_names=["logits"], dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
