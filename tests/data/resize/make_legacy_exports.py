#!/usr/bin/python3
"""Makes the old-opset fixtures of tests/resize_test.cc: F.interpolate exported by torch 2.15's TorchScript
exporter at opset 9 (Upsample) and 10 (Resize-10), and ONNX Runtime's outputs for one input. Those ops sample
asymmetrically (x / scale); ONNX's version converter, which onnxtrain ran on opsets below 13, turned them into
a half-pixel Resize (an outside check: 2.98 from ONNX Runtime on nearest x1.6). Nearest x1.6 at width 12 also
puts output 8 on input 8 / 1.6 = 5.0 in float, 4.99999992 in double: ONNX Runtime and PyTorch read input 5.

- upsample9_nearest.onnx: F.interpolate(scale_factor=1.6, mode="nearest") at opset 9, input x (1, 2, 12, 12).
- resize10_bilinear.onnx: F.interpolate(scale_factor=2, mode="bilinear") at opset 10, the same input.
- recompute_scale_ts.onnx: F.interpolate(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True) at
  opset 17, dynamic batch: TorchScript computes the sizes as Floor(Cast(Shape) * 1.7), and onnxtrain lacked
  Floor (the same outside check).
- legacy_reference.npz: x and each model's ONNX Runtime output (upsample9_nearest, resize10_bilinear,
  recompute_scale_ts).

    VENV/bin/python tests/data/resize/make_legacy_exports.py   # writes next to this script
"""
import os
import warnings

import numpy as np
import onnxruntime as ort
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


class Interpolate(torch.nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.options = options

    def forward(self, x):
        return F.interpolate(x, **self.options)


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    x = np.random.default_rng(0).standard_normal((1, 2, 12, 12)).astype(np.float32)
    arrays = {"x": x}
    for name, opset, options in (("upsample9_nearest", 9, dict(scale_factor=1.6, mode="nearest")),
                                 ("resize10_bilinear", 10, dict(scale_factor=2.0, mode="bilinear")),
                                 ("recompute_scale_ts", 17,
                                  dict(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True))):
        path = os.path.join(HERE, name + ".onnx")
        torch.onnx.export(Interpolate(**options), (torch.from_numpy(x),), path, dynamo=False, opset_version=opset,
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch"}})
        arrays[name] = ort.InferenceSession(path).run(None, {"x": x})[0]
    np.savez(os.path.join(HERE, "legacy_reference.npz"), **arrays)
