#!/usr/bin/python3
"""A tiny language model for the CLI tests of token data (tests/train_cli_test.cc, issue 20).

bigram_lm.onnx: input_ids int64 (batch, seq) -> Embedding(256, 24) + learned positions (1, 16, 24) ->
Tanh -> Linear(24, 256) -> logits float32 (batch, seq, 256). Every position predicts the next byte from
its own byte and position only (a bigram model), which needs no causal mask, so it uses only ops that
every strategy runs. The sequence length is static (16): `--seq-len` defaults to it.

Made with torch 1.13's TorchScript exporter (Debian's /usr/bin/python3), opset 17, training mode, no
constant folding: run `/usr/bin/python3 tests/data/lm/make_bigram_lm.py` to rewrite it.
"""
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


class BigramLM(torch.nn.Module):
    def __init__(self, vocab=256, width=24, positions=16):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.positions = torch.nn.Parameter(torch.randn(1, positions, width) * 0.1)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, input_ids):
        x = self.embed(input_ids) + self.positions[:, : input_ids.shape[1]]
        return self.head(torch.tanh(x))


def main():
    torch.manual_seed(0)
    model = BigramLM().train()
    ids = torch.randint(0, 256, (2, 16))
    torch.onnx.export(model, (ids,), os.path.join(HERE, "bigram_lm.onnx"), opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input_ids"], output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"}})


if __name__ == "__main__":
    main()
