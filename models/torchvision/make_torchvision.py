#!/usr/bin/env python3
"""Exports torchvision's MobileNetV2 (width_mult=0.25, 10 classes, random weights) to
models/torchvision/mobilenet_v2_w025.onnx: a genuine torchvision architecture small enough to commit
(about 1 MB), for tests/torchvision_acceptance_test.py and docs/bring-your-own-model.md. Also a tiny
torchvision VisionTransformer (32x32 in patches of 8, 2 layers of width 64, 4 heads, MLP 128, 10
classes) to vit_tiny.onnx, with an input batch and torch's logits for it (vit_tiny_input.npy,
vit_tiny_logits.npy) for tests/inference_test.cc: its TorchScript export computes attention shapes with
Mod, which onnxtrain lacked before 2026-12-05.

Made with torch 2.15.0 (the PyPI wheel, 2.15.0+cu132; the export runs on the CPU), torchvision 0.29.2,
onnx 1.23.2, onnxscript 0.7.2, seed 0; run again, it writes the same bytes (sha256 c0d64020...):

    python3 -m venv /tmp/torchvenv
    /tmp/torchvenv/bin/pip install torch torchvision onnx onnxscript numpy --index-url https://pypi.org/simple
    /tmp/torchvenv/bin/python models/torchvision/make_torchvision.py

Exporter: torch.onnx.export(..., dynamo=False), the TorchScript exporter, opset 17, from train() mode
with training=torch.onnx.TrainingMode.TRAINING and do_constant_folding=False, input (batch, 3, 32, 32)
with a symbolic batch. Why this mode: with the exporter's defaults (training=TrainingMode.EVAL,
do_constant_folding=True) every BatchNormalization is folded into the convolution before it, whether
the module is in train() or eval() (checked with torch 2.15), and the dynamo exporter's default
optimize=True does the same: the BN weights, biases and running statistics are gone and the
convolution weights hold other values. TrainingMode.EVAL also drops Dropout. With TRAINING and folding
off, every BatchNormalization stays a node with training_mode=1 under PyTorch's parameter names, and the
classifier's Dropout(0.2) stays; onnxtrain trains them and writes them back in inference mode.

Tracing runs a forward pass in train() mode, which moves the BN running statistics; the script writes
the freshly initialised ones (mean 0, var 1) back, so the file holds the model exactly as constructed.
"""
import os

import onnx
import torch
import torchvision
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "mobilenet_v2_w025"


def build():
    torch.manual_seed(0)
    return torchvision.models.mobilenet_v2(weights=None, width_mult=0.25, num_classes=10)


def export_vit():
    """The tiny ViT, its input and torch's logits (train() mode: dropout 0, no batch statistics, so the
    logits are those of eval() too)."""
    import numpy as np
    torch.manual_seed(0)
    model = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                                                 hidden_dim=64, mlp_dim=128, num_classes=10)
    model.train()
    path = os.path.join(HERE, "vit_tiny.onnx")
    torch.onnx.export(model, (torch.randn(2, 3, 32, 32),), path, dynamo=False, opset_version=17,
                      export_params=True, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    x = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(x)
    np.save(os.path.join(HERE, "vit_tiny_input.npy"), x.numpy())
    np.save(os.path.join(HERE, "vit_tiny_logits.npy"), logits.numpy())
    m = onnx.load(path)
    print("%s: %.2f MB, ops: %s" % (path, os.path.getsize(path) / 1e6,
                                    sorted({n.op_type for n in m.graph.node})))


def main():
    export_vit()
    model = build()
    model.train()
    path = os.path.join(HERE, NAME + ".onnx")
    torch.onnx.export(model, (torch.randn(2, 3, 32, 32),), path, dynamo=False, opset_version=17,
                      export_params=True, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    pristine = {k: v for k, v in build().state_dict().items() if "running_" in k}
    m = onnx.load(path)
    for i, t in enumerate(m.graph.initializer):
        if t.name in pristine:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(pristine.pop(t.name).numpy(), t.name))
    assert not pristine, "BN buffers not found as initializers: %s" % sorted(pristine)
    m.producer_name, m.producer_version = "pytorch", torch.__version__
    m.doc_string = ("torchvision %s mobilenet_v2(width_mult=0.25, num_classes=10), seed 0, TorchScript exporter, "
                    "train() mode, do_constant_folding=False: models/torchvision/make_torchvision.py"
                    % torchvision.__version__)
    onnx.checker.check_model(m, full_check=True)
    onnx.save_model(m, path)

    ops = {}
    for n in m.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    bn_training = sum(1 for n in m.graph.node if n.op_type == "BatchNormalization"
                      and any(a.name == "training_mode" and a.i == 1 for a in n.attribute))
    params = sum(p.numel() for p in model.parameters())
    print("%s: %.2f MB, %d parameters, opset %d, %d of %d BatchNormalization in training mode"
          % (path, os.path.getsize(path) / 1e6, params, m.opset_import[0].version, bn_training,
             ops.get("BatchNormalization", 0)))
    print("ops:", ", ".join("%s %d" % kv for kv in sorted(ops.items())))
    assert bn_training == ops.get("BatchNormalization", 0) > 0


if __name__ == "__main__":
    main()
