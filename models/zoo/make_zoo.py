#!/usr/bin/python3
"""Exports torchvision networks to models/zoo/*.onnx for `onnxtrain inspect` / `bench` (the files are
tens of MB, so they are generated, never committed; models/zoo/*.onnx is git-ignored).

Run with Debian's PyTorch (apt-get install python3-torch python3-torchvision, or
tools/install-deps.sh --fixtures):  models/zoo/make_zoo.py [NAME ...]
Exports are TorchScript, opset 17, training mode (BatchNormalization keeps batch statistics,
do_constant_folding off), input (batch,3,224,224) with a symbolic batch, random initial weights (seed 0).
"""
import os
import sys

import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
NETWORKS = ["resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1", "densenet121"]


def export(name):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None)
    model.train()
    path = os.path.join(HERE, name + ".onnx")
    torch.onnx.export(model, torch.randn(2, 3, 224, 224), path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    params = sum(p.numel() for p in model.parameters())
    print("%-14s %8.1f MB  %d parameters" % (name, os.path.getsize(path) / 1e6, params))


if __name__ == "__main__":
    for net in sys.argv[1:] or NETWORKS:
        export(net)
