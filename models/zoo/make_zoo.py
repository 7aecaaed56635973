#!/usr/bin/python3
"""Exports the networks listed in models/zoo/zoo.json to models/zoo/NAME.onnx for `onnxtrain inspect`
and `onnxtrain bench --zoo NAME` (the files are tens of MB, so they are generated, never committed;
models/zoo/*.onnx is git-ignored).

Run with Debian's PyTorch (apt-get install python3-torch python3-torchvision, or
tools/install-deps.sh --fixtures):  models/zoo/make_zoo.py [NAME ...]   (default: every network)
Exports are TorchScript, opset 17, training mode (BatchNormalization keeps batch statistics,
do_constant_folding off), input (batch, C, H, W) with a symbolic batch, random initial weights (seed 0).
The *_32 networks take CIFAR-sized input and have 10 classes: the CPU-sized zoo.
"""
import inspect
import json
import os
import sys

import onnx
import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))


def networks():
    with open(os.path.join(HERE, "zoo.json")) as f:
        return {n["name"]: n for n in json.load(f)["networks"]}


def build(entry):
    make = getattr(torchvision.models, entry["torchvision"])
    kwargs = {"weights": None, "num_classes": entry["classes"]}
    if entry["torchvision"] == "googlenet":
        kwargs.update(aux_logits=False, init_weights=True)  # train() would return the auxiliary outputs too
    model = make(**kwargs)
    if entry["torchvision"].startswith("vgg") and entry["input"][1] == 32:
        # The CIFAR form of VGG: at 32x32 the features end 512x1x1, and torchvision's ImageNet classifier
        # (25088 -> 4096 -> 4096, 128M parameters) would replicate that 49 times; one Linear(512, classes).
        model.avgpool = torch.nn.Identity()
        model.classifier = torch.nn.Linear(512, entry["classes"])
    return model


def export(entry):
    torch.manual_seed(0)
    model = build(entry)
    model.train()
    path = os.path.join(HERE, entry["name"] + ".onnx")
    # torch 2.9 and later export with dynamo by default, whose graph optimisation folds BatchNormalization
    # into the convolutions even in training mode: ask for the TorchScript exporter where it is optional.
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, torch.randn(2, *entry["input"]), path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, **legacy)
    if not any(n.op_type == "BatchNormalization" for n in onnx.load(path, load_external_data=False).graph.node) \
            and any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules()):
        sys.exit("%s: the exporter folded BatchNormalization away; onnxtrain would train a net without it" % path)
    params = sum(p.numel() for p in model.parameters())
    print("%-16s %8.1f MB  %d parameters" % (entry["name"], os.path.getsize(path) / 1e6, params))


if __name__ == "__main__":
    known = networks()
    for name in sys.argv[1:] or list(known):
        if name not in known:
            sys.exit("%s: no network '%s' in zoo.json (known: %s)" % (sys.argv[0], name, ", ".join(known)))
        export(known[name])
