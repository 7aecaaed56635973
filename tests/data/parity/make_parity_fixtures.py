#!/usr/bin/python3
"""PyTorch's side of tests/trainer_parity_test.cc: the one-device Trainer against torch autograd and
torch.optim on the four fixture models (models/NAME_opset17.onnx).

Run with Debian's python3 (torch 1.13.0, onnx 1.12: tools/install-deps.sh --fixtures), from anywhere:
    /usr/bin/python3 tests/data/parity/make_parity_fixtures.py
Made with torch 1.13.0a0 (Debian 12), CPU, float32.

For each model, the torch module of models/make_fixtures.py gets the weights of NAME_opset17.onnx (as
models/expected/make_gradients.py does), in train() state (BatchNorm on batch statistics; the
transformer's Dropout p set to 0, the only way parity is possible: onnxtrain's side turns Dropout off
with TrainerOptions::dropout = false). Loss: F.cross_entropy (mean) on int64 labels. Writes, per model,
NAME/ beside this script:
  input.npy           the batch: float32 (8, ...) from a normal distribution, or int64 token ids (8, 16)
  labels.npy          int64 (8,) class labels in [0, 10)
  loss.npy            float32 scalar: the loss of one forward pass from the ONNX file's weights
  grad/P.npy          the gradient of that loss with respect to parameter P (torch's parameter name)
  sgd10/P.npy         P after ten torch.optim.SGD steps on the same batch (SGD_* below)
  sgd10/losses.npy    float32 (10,): the loss before each of those steps
  adamw10/...         the same for ten torch.optim.AdamW steps (ADAMW_* below)
  sgd10/B.npy, adamw10/B.npy   resnet only: the BatchNorm buffers B = *.running_mean / *.running_var
                               after the ten steps (torch: momentum 0.1, unbiased batch variance)
The hyper-parameters are repeated in the C++ test: keep both in step.

It also prints, per model and run, how far torch itself moves when the same ten steps run in float64
instead of float32: the float32 rounding noise that no float32 implementation can be asked to beat,
and the reason for the ten-step tolerances of the C++ test.
"""
import os
import shutil
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "models")
sys.path.insert(0, MODELS)
import make_fixtures  # noqa: E402  (the module definitions)

NAMES = ["mlp", "cnn", "resnet", "transformer"]
BATCH = 8
STEPS = 10
SGD_LR, SGD_MOMENTUM, SGD_WEIGHT_DECAY = 0.01, 0.9, 1e-4
ADAMW_LR, ADAMW_WEIGHT_DECAY = 1e-3, 0.01  # betas (0.9, 0.999), eps 1e-8: torch's defaults


def load_model(name, dtype=torch.float32):
    model = make_fixtures.build(name)
    onnx_model = onnx.load(os.path.join(MODELS, name + "_opset17.onnx"))
    weights = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in onnx_model.graph.initializer}
    state = model.state_dict()
    missing = [k for k in state if k not in weights and not k.endswith("num_batches_tracked")]
    assert not missing, "%s: not in the ONNX file: %s" % (name, missing)
    model.load_state_dict({k: weights[k] for k in state if k in weights}, strict=False)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    model.train()
    return model.to(dtype)


def make_batch(name, rng):
    example = make_fixtures.SPECS[name][1](BATCH)
    if example.dtype == torch.int64:
        x = rng.integers(0, 100, size=tuple(example.shape), dtype=np.int64)
    else:
        x = rng.standard_normal(tuple(example.shape)).astype(np.float32)
    y = rng.integers(0, 10, size=(BATCH,), dtype=np.int64)
    return x, y


def as_input(x, dtype):
    t = torch.from_numpy(x)
    return t if t.dtype == torch.int64 else t.to(dtype)


def train(name, x, y, optimizer, dtype):
    model = load_model(name, dtype)
    opt = optimizer(model.parameters())
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(as_input(x, dtype)), torch.from_numpy(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    state = {k: v.detach().clone() for k, v in model.named_parameters()}
    state.update({k: v.clone() for k, v in model.named_buffers() if "running_" in k})
    return state, np.array(losses, dtype=np.float32)


RUNS = {
    "sgd10": lambda p: torch.optim.SGD(p, lr=SGD_LR, momentum=SGD_MOMENTUM, weight_decay=SGD_WEIGHT_DECAY),
    "adamw10": lambda p: torch.optim.AdamW(p, lr=ADAMW_LR, weight_decay=ADAMW_WEIGHT_DECAY),
}


def save(path, array):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, array)


def main():
    print("torch %s, onnx %s" % (torch.__version__, onnx.__version__))
    rng = np.random.default_rng(2026)
    total = 0
    for name in NAMES:
        out = os.path.join(HERE, name)
        shutil.rmtree(out, ignore_errors=True)
        x, y = make_batch(name, rng)
        save(os.path.join(out, "input.npy"), x)
        save(os.path.join(out, "labels.npy"), y)

        model = load_model(name)
        loss = F.cross_entropy(model(as_input(x, torch.float32)), torch.from_numpy(y))
        loss.backward()
        save(os.path.join(out, "loss.npy"), loss.detach().numpy())
        for pname, p in model.named_parameters():
            save(os.path.join(out, "grad", pname + ".npy"), p.grad.numpy())
        print("%-11s loss %.6f, %d parameters" % (name, loss.item(), len(list(model.parameters()))))

        for run, optimizer in RUNS.items():
            state, losses = train(name, x, y, optimizer, torch.float32)
            state64, _ = train(name, x, y, optimizer, torch.float64)
            save(os.path.join(out, run, "losses.npy"), losses)
            worst = (0.0, "")
            for k, v in state.items():
                save(os.path.join(out, run, k + ".npy"), v.numpy())
                # float32 against float64, relative to the tensor's largest magnitude
                err = float((v.double() - state64[k]).abs().max() / max(state64[k].abs().max().item(), 1e-12))
                worst = max(worst, (err, k))
            print("  %-8s losses %.5f .. %.5f; torch float32 vs float64 after %d steps: worst %.2e (%s)"
                  % (run, losses[0], losses[-1], STEPS, worst[0], worst[1]))
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
        total += size
        print("  %d bytes" % size)
    print("total %d bytes" % total)


if __name__ == "__main__":
    main()
