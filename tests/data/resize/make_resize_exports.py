#!/usr/bin/python3
"""Makes the Resize fixtures of tests/resize_test.cc: a small network that upsamples and downsamples the
ways PyTorch models do (a UNet decoder's nn.Upsample, F.interpolate to a size, a bicubic shrink), exported
by both of torch's exporters (torch 2.15), and PyTorch's first-step loss and parameter gradients for one
batch, in float64 and float32 (the test holds onnxtrain to 10x PyTorch's own float32 error).

- upsample_ts.onnx, upsample_dynamo.onnx: Conv2d(3, 4, 3, padding=1) -> ReLU -> nn.Upsample(scale_factor=2,
  nearest) -> Conv2d(4, 4, 3, padding=1) -> PixelUnshuffle(2) -> Conv2d(16, 8, 1) -> PixelShuffle(2)
  (SpaceToDepth and DepthToSpace in ONNX) -> F.interpolate(size=(11, 13), bilinear, align_corners=False)
  -> Conv2d(2, 4, 3, padding=1) -> F.interpolate(scale_factor=0.5, bicubic, align_corners=True) ->
  flatten -> Linear(4 * 5 * 6, 5). Input (batch, 3, 6, 7); dynamic batch.
- resize_antialias.onnx: one opset-18 Resize node named shrink_aa with antialias=1, which onnxtrain
  refuses at import (made with onnx.helper).
- crop_batch.onnx: one Resize (tf_crop_and_resize by scales over every axis, roi 0..1 on the batch) on a
  (batch, 3, 8, 8) input; its output kept the batch's symbol only after an outside check.
- upsample_reference.npz: input, labels (int64), loss64, loss32, and grad64/NAME, grad32/NAME for every
  parameter, NAME its ONNX initializer name (the script checks both exports name them as PyTorch does).

    VENV/bin/python tests/data/resize/make_resize_exports.py   # writes next to this script
"""
import copy
import os

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


class UpNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.unshuffle, self.shuffle = nn.PixelUnshuffle(2), nn.PixelShuffle(2)
        self.mix = nn.Conv2d(16, 8, 1)
        self.conv3 = nn.Conv2d(2, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 5 * 6, 5)

    def forward(self, x):
        x = self.conv2(self.up(torch.relu(self.conv1(x))))  # (N, 4, 12, 14)
        x = self.shuffle(self.mix(self.unshuffle(x)))  # (N, 16, 6, 7) -> (N, 8, 6, 7) -> (N, 2, 12, 14)
        x = self.conv3(F.interpolate(x, size=(11, 13), mode="bilinear", align_corners=False))
        x = F.interpolate(x, scale_factor=0.5, mode="bicubic", align_corners=True)
        return self.fc(x.flatten(1))


def gradients(model, x, labels):
    model.zero_grad()
    loss = F.cross_entropy(model(x), labels)
    loss.backward()
    return loss.item(), {n: p.grad.detach().numpy().copy() for n, p in model.named_parameters()}


def write_antialias_model():
    from onnx import TensorProto, helper
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="shrink_aa", mode="linear", antialias=1)
    graph = helper.make_graph([node], "antialias", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 0.5, 0.5])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), os.path.join(HERE, "resize_antialias.onnx"))


def write_crop_model():
    """A tf_crop_and_resize over every axis by scales, on a symbolic batch: the batch's roi is 0..1 at scale 1."""
    from onnx import TensorProto, helper
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], name="crop", mode="linear",
                            coordinate_transformation_mode="tf_crop_and_resize")
    graph = helper.make_graph([node], "crop", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("roi", TensorProto.FLOAT, [8], [0, 0, 0.1, 0.1, 1, 1, 0.9, 0.9]),
                               helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 2, 2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(HERE, "crop_batch.onnx"))


def check_names(path, model):
    names = {i.name for i in onnx.load(path).graph.initializer}
    missing = [n for n, _ in model.named_parameters() if n not in names]
    assert not missing, f"{path} names parameters otherwise: {missing} not among {sorted(names)}"


if __name__ == "__main__":
    torch.manual_seed(0)
    model = UpNet()
    x = torch.randn(2, 3, 6, 7)
    labels = torch.tensor([1, 3])
    for name, dynamo in (("upsample_ts.onnx", False), ("upsample_dynamo.onnx", True)):
        path = os.path.join(HERE, name)
        if dynamo:
            torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["logits"], dynamo=True,
                              dynamic_shapes=({0: torch.export.Dim("batch")},), external_data=False)
        else:
            torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["logits"], dynamo=False,
                              dynamic_axes={"input": {0: "batch"}})
        check_names(path, model)
    loss32, g32 = gradients(model, x, labels)
    model64 = copy.deepcopy(model).double()
    loss64, g64 = gradients(model64, x.double(), labels)
    arrays = {"input": x.numpy(), "labels": labels.numpy(), "loss32": np.array(loss32), "loss64": np.array(loss64)}
    for n in g32:
        arrays["grad32/" + n] = g32[n]
        arrays["grad64/" + n] = g64[n]
    np.savez(os.path.join(HERE, "upsample_reference.npz"), **arrays)
    write_antialias_model()
    write_crop_model()
    print("loss float32", loss32, "float64", loss64)
