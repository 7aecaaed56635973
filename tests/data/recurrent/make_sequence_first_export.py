"""Makes lstm_sequence_first_ts.onnx: nn.LSTM(5, 8) in its default sequence-first layout, its last step into
Linear(8, 3), exported with the batch dynamic on axis 1 of the input (7, batch, 5) (TorchScript, opset 17).
onnxtrain reads samples along a data input's first axis: `train` refuses this model and says to export it
batch-first (tests/cli_reliability_test.cc; an outside check of 2026-12-07 was told it had "a fixed batch
of 7", then, at --batch 7, of an input 'labels' the model does not have).

Run with a Python that has torch and onnx: python make_sequence_first_export.py
"""
import os
import warnings

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


class SequenceFirst(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(5, 8)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(self.rnn(x)[0][-1])


torch.manual_seed(0)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.onnx.export(SequenceFirst(), (torch.randn(7, 6, 5),), os.path.join(HERE, "lstm_sequence_first_ts.onnx"),
                      dynamo=False, opset_version=17, input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {1: "batch"}, "logits": {0: "batch"}})
