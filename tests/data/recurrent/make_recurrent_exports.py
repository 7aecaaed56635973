#!/usr/bin/python3
"""Makes the recurrent fixtures of tests/recurrent_parity_test.cc: nn.LSTM, nn.GRU and nn.RNN, exported by
both of torch's exporters (torch 2.15) as ONNX's LSTM, GRU and RNN ops, and PyTorch's first-step loss and
parameter gradients for one batch, in float64 and float32. Each model feeds a Linear to 4 classes from its
output Y (at every step, or at the last) and from its final states Y_h (and Y_c), so all of them carry a
gradient. Inputs are (batch, sequence, 5), batch 3, with the batch dynamic; a model built with
batch_first=False transposes its input to (sequence, batch, 5) first.

- lstm_*.onnx: LSTM(5, 6, batch_first=True); cat(Y.mean over steps, Y_h, Y_c). Sequence 4.
- lstm_bidirectional_*.onnx: LSTM(5, 6, num_layers=2, bidirectional=True); cat(Y at the last step, the four
  Y_h and the four Y_c of both layers and directions). Sequence 4.
- gru_*.onnx: GRU(5, 7, batch_first=True) (linear_before_reset=1); cat(Y.mean over steps, Y_h). Sequence 5.
- gru_initial_h_*.onnx: GRU(5, 6, bidirectional=True, batch_first=True) started from h0 = tanh(Linear(5, 12)
  of the first step) per sample (the op's initial_h, which gets a gradient); cat(Y.mean, both Y_h).
  Sequence 5.
- rnn_ts.onnx: RNN(5, 6) (tanh); cat(Y.mean over steps, Y_h). Sequence 4. TorchScript only: the dynamo
  exporter unrolls aten.rnn_tanh into MatMul, Add and Tanh (onnxscript's torch_lib has no RNN), so its
  export holds no RNN node and is not written.
- NAME_reference.npz: input, labels (int64), loss64, loss32, and grad64/PARAM, grad32/PARAM for every
  parameter, PARAM its ONNX initializer name. TorchScript is exported without constant folding so that the
  weights stay PyTorch's initializers and the gate reordering (PyTorch's ifgo and rzn to ONNX's iofc and zrh)
  stays in the graph as Slice and Concat, as the dynamo exporter writes it.

Each export is run in ONNX Runtime at batch 3 and 5 against PyTorch's forward (the maximum difference is
printed), and its recurrent nodes' attributes and inputs are printed. The dynamo exports' nodes lose their
metadata_props (stack traces and FX node text: nine tenths of the bidirectional LSTM's 300 KB; onnxtrain reads
none of them).

    VENV/bin/python tests/data/recurrent/make_recurrent_exports.py   # writes next to this script
"""
import os
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from pytorch_reference import export_both, write_reference  # noqa: E402


class Lstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(5, 6, batch_first=True)
        self.fc = nn.Linear(18, 4)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        return self.fc(torch.cat([y.mean(1), h[0], c[0]], 1))


class LstmBidirectional(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(5, 6, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(12 + 24 + 24, 4)

    def forward(self, x):
        y, (h, c) = self.lstm(x.transpose(0, 1))
        # y[-1]: the forward direction's last step and the backward direction's first (its final state is y[0]).
        return self.fc(torch.cat([y[-1], h.transpose(0, 1).flatten(1), c.transpose(0, 1).flatten(1)], 1))


class Gru(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(5, 7, batch_first=True)
        self.fc = nn.Linear(14, 4)

    def forward(self, x):
        y, h = self.gru(x)
        return self.fc(torch.cat([y.mean(1), h[0]], 1))


class GruInitialH(nn.Module):
    def __init__(self):
        super().__init__()
        self.init = nn.Linear(5, 12)
        self.gru = nn.GRU(5, 6, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(24, 4)

    def forward(self, x):
        h0 = torch.tanh(self.init(x[:, 0])).view(-1, 2, 6).transpose(0, 1).contiguous()  # (directions, batch, 6)
        y, h = self.gru(x, h0)
        return self.fc(torch.cat([y.mean(1), h.transpose(0, 1).flatten(1)], 1))


class Rnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(5, 6, nonlinearity="tanh")
        self.fc = nn.Linear(12, 4)

    def forward(self, x):
        y, h = self.rnn(x.transpose(0, 1))
        return self.fc(torch.cat([y.mean(0), h[0]], 1))


class RnnRelu(Rnn):
    """nn.RNN(nonlinearity="relu"): TorchScript writes activations ["Relu"] (an outside check, 2026-12-07)."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(5, 6, nonlinearity="relu")


def drop_node_metadata(path):
    model = onnx.load(path)
    for n in model.graph.node:
        del n.metadata_props[:]
    onnx.save(model, path)


def check_in_onnxruntime(model, path, sequence):
    """The largest |ONNX Runtime - PyTorch| of the logits at batch 3 and at batch 5 (the batch is dynamic)."""
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    worst = 0.0
    for batch in (3, 5):
        x = torch.randn(batch, sequence, 5)
        with torch.no_grad():
            expected = model(x).numpy()
        worst = max(worst, float(np.abs(session.run(None, {"input": x.numpy()})[0] - expected).max()))
    return worst


def describe(path, op_type):
    graph = onnx.load(path).graph
    ops = sorted({n.op_type for n in graph.node})
    print(f"  {os.path.basename(path)}: ops {' '.join(ops)}")
    for n in graph.node:
        if n.op_type == op_type:
            attributes = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            attributes = {k: v.decode() if isinstance(v, bytes) else v for k, v in attributes.items()}
            names = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
            present = [names[i] for i, name in enumerate(n.input) if name]
            outputs = [["Y", "Y_h", "Y_c"][i] for i, name in enumerate(n.output) if name]
            print(f"    {op_type} {attributes} inputs {present} outputs {outputs}")


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    labels = torch.tensor([1, 3, 0])
    for seed, (stem, op_type, make, sequence) in enumerate((("lstm", "LSTM", Lstm, 4),
                                                            ("lstm_bidirectional", "LSTM", LstmBidirectional, 4),
                                                            ("gru", "GRU", Gru, 5),
                                                            ("gru_initial_h", "GRU", GruInitialH, 5),
                                                            ("rnn", "RNN", Rnn, 4),
                                                            ("rnn_relu", "RNN", RnnRelu, 4))):
        torch.manual_seed(seed)
        model = make()
        x = torch.randn(3, sequence, 5)
        try:
            export_both(model, x, HERE, stem, op_type, do_constant_folding=False)
        except AssertionError as e:  # the RNN's dynamo export, which unrolls the recurrence (above)
            dynamo = os.path.join(HERE, stem + "_dynamo.onnx")
            if f"{dynamo} has no {op_type} node" not in str(e):
                raise
            print(f"{stem}: dynamo's export has no {op_type} node; not written")
            os.remove(dynamo)
        for exporter in ("ts", "dynamo"):
            path = os.path.join(HERE, f"{stem}_{exporter}.onnx")
            if os.path.exists(path):
                if exporter == "dynamo":
                    drop_node_metadata(path)
                print(f"{stem}_{exporter}.onnx: ONNX Runtime against PyTorch, max |difference| "
                      f"{check_in_onnxruntime(model, path, sequence):.3g}")
                describe(path, op_type)
        write_reference(os.path.join(HERE, stem + "_reference.npz"), model, x, labels)
