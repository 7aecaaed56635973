"""Makes gru_packed_ts.onnx: a GRU over packed sequences of different lengths, as PyTorch code batches them
(pack_padded_sequence(enforce_sorted=False) -> nn.GRU -> pad_packed_sequence), exported by TorchScript
with the batch dynamic in both inputs, x (batch, 6, 5) and lengths (batch). The export sorts the lengths
with TopK(lengths, Shape(lengths)[0]) and feeds them to the GRU as sequence_lens; an outside check
(2026-12-07) found `run` and `train` refused it, the TopK's K being known only as the batch. Also writes
gru_packed_data.npz (x, lengths, labels: the data `train` reads) and gru_packed_expected.npz (PyTorch's
logits and cross-entropy loss for them).

Run with a Python that has torch and onnx: python make_packed_export.py
"""
import os
import warnings

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

HERE = os.path.dirname(os.path.abspath(__file__))


class PackedGru(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(5, 8, batch_first=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, x, lengths):
        packed, _ = self.rnn(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
        padded, _ = pad_packed_sequence(packed, batch_first=True, total_length=x.shape[1])
        return self.fc(padded.sum(1))


torch.manual_seed(0)
model = PackedGru().eval()
x = torch.randn(4, 6, 5)
lengths = torch.tensor([6, 2, 4, 3])
for i, length in enumerate(lengths):
    x[i, length:] = 0
labels = torch.tensor([0, 1, 2, 0])
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.onnx.export(model, (x, lengths), os.path.join(HERE, "gru_packed_ts.onnx"), dynamo=False, opset_version=17,
                      input_names=["x", "lengths"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "lengths": {0: "batch"}, "logits": {0: "batch"}})
with torch.no_grad():
    logits = model(x, lengths)
loss = nn.functional.cross_entropy(logits, labels)
np.savez(os.path.join(HERE, "gru_packed_data.npz"), x=x.numpy(), lengths=lengths.numpy(), labels=labels.numpy())
np.savez(os.path.join(HERE, "gru_packed_expected.npz"), logits=logits.numpy(), loss=np.array(loss.item(), np.float32))
print("loss", loss.item())
