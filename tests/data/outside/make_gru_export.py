#!/usr/bin/python3
"""Makes gru_dynamo.onnx, which tests/malformed_model_test.cc used until onnxtrain trained GRU (2026-12-07;
that test now uses a Hardmax in an opset-18 model): a GRU classifier as torch's dynamo exporter
writes it (torch 2.15, onnxscript; torch.onnx.export(..., dynamo=True, optimize=False), opset 18),
nn.GRU(8, 32, batch_first=True) over (batch, 16, 8) and a Linear(32, 10) on the last step. onnxtrain has
no GRU, and ONNX's shape inference gives its outputs no type in this export: the import must name the GRU
node, not the Transpose after it (an outside check of 2026-12-06 found the Transpose named).

    VENV/bin/python tests/data/outside/make_gru_export.py   # writes next to this script
"""
import os

import torch
import torch.nn as nn


class GRUClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(8, 32, batch_first=True)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):  # (N, 16, 8)
        out, _ = self.rnn(x)
        return self.fc(out[:, -1])


torch.manual_seed(0)
model = GRUClassifier().train()
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gru_dynamo.onnx")
torch.onnx.export(model, (torch.randn(2, 16, 8),), path, dynamo=True, optimize=False, opset_version=18,
                  input_names=["input"], output_names=["logits"],
                  dynamic_shapes={"x": {0: torch.export.Dim("batch")}}, external_data=False)
