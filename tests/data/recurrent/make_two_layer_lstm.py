"""Makes lstm_two_layer_ts.onnx: nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True) over 12
steps, its last step into Linear(32, 4), exported by TorchScript (opset 17, batch dynamic) without
constant folding, as the outside check exported it: the model then rearranges each layer's weights (PyTorch's
gate order to ONNX's) with 90-odd Shape, Slice and Concat nodes before the LSTM nodes, at every step.

An outside check of 2026-12-07 found `train --strategy pipedream --stages 2` (no --plan) cutting this model
after those weight nodes, with both LSTMs on stage 1: the cost model priced an LSTM by its FLOPs alone,
and a step of 16 units costs four times its FLOPs. tests/partition_test.cc checks that the planner now puts
one LSTM on each stage.

Run with a Python that has torch and onnx: python make_two_layer_lstm.py
"""
import os
import warnings

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


class TwoLayerLstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc(self.rnn(x)[0][:, -1])


torch.manual_seed(0)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.onnx.export(TwoLayerLstm(), (torch.randn(4, 12, 8),), os.path.join(HERE, "lstm_two_layer_ts.onnx"),
                      dynamo=False, opset_version=17, do_constant_folding=False, input_names=["x"],
                      output_names=["logits"], dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
