#!/usr/bin/python3
"""PyTorch's gradients for the autodiff tests (tests/training_graph_test.cc): for each fixture below,
the torch module of models/make_fixtures.py is loaded with the weights of NAME_opset17.onnx, run in
train() state (BatchNorm uses batch statistics, as the exported training-mode graph does) on a seeded
input, and the gradient of loss = sum(logits * R) with respect to every parameter is saved as
gradients/NAME/<parameter name>.npy, beside gradients/NAME/input.npy, gradients/NAME/loss.npy and gradients/loss_weights.npy (R).

Run with Debian's python3 (torch 1.13, onnx 1.12: tools/install-deps.sh --fixtures):
    models/expected/make_gradients.py
The transformer fixture is left out: its Dropout masks come from a generator PyTorch does not share.
"""
import os
import shutil
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.dirname(HERE)
sys.path.insert(0, MODELS)
import make_fixtures  # noqa: E402  (the module definitions)

FIXTURES = ["mlp", "cnn", "resnet"]
BATCH = 4


def main():
    rng = np.random.default_rng(5)
    out_root = os.path.join(HERE, "gradients")
    r = rng.standard_normal(10).astype(np.float32)
    os.makedirs(out_root, exist_ok=True)
    np.save(os.path.join(out_root, "loss_weights.npy"), r)
    for name in FIXTURES:
        model = make_fixtures.build(name)
        onnx_model = onnx.load(os.path.join(MODELS, name + "_opset17.onnx"))
        weights = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in onnx_model.graph.initializer}
        state = model.state_dict()
        loaded = {k: weights[k] for k in state if k in weights}
        missing = [k for k in state if k not in weights and not k.endswith("num_batches_tracked")]
        assert not missing, "%s: not in the ONNX file: %s" % (name, missing)
        model.load_state_dict(loaded, strict=False)
        model.train()
        x = make_fixtures.SPECS[name][1](BATCH)
        x = torch.from_numpy(rng.standard_normal(tuple(x.shape)).astype(np.float32))
        loss = (model(x) * torch.from_numpy(r)).sum()
        loss.backward()
        out = os.path.join(out_root, name)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        np.save(os.path.join(out, "input.npy"), x.numpy())
        np.save(os.path.join(out, "loss.npy"), loss.detach().numpy())
        count = 0
        for pname, p in model.named_parameters():
            np.save(os.path.join(out, pname + ".npy"), p.grad.numpy())
            count += 1
        print("%-7s loss %.6f, %d parameter gradients, torch %s" % (name, loss.item(), count, torch.__version__))


if __name__ == "__main__":
    main()
