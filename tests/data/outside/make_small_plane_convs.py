#!/usr/bin/python3
"""Makes small_plane_convs.onnx for tests/cli_reliability_test.cc: convolutions that onnxtrain trains in
other forms than the model's, whose --dump-gradients files were named and laid out in those forms ("W.tap_major"
(kh, kw, C, M), "W.live_taps" (M, C*box)) until an outside check found them. Input x (batch, 4, 2, 2):
Conv a.weight (8, 4, 3, 3) pad 1 on the 2x2 plane (tap-major), MaxPool 2 to 1x1, Conv b.weight (8, 8, 3, 3)
pad 1 on the 1x1 plane (only the centre tap live), Flatten, Gemm fc.weight (3, 8). Random weights, seed 0.

    VENV/bin/python tests/data/outside/make_small_plane_convs.py   # writes next to this script
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))

if __name__ == "__main__":
    rng = np.random.default_rng(0)
    weights = {"a.weight": (8, 4, 3, 3), "b.weight": (8, 8, 3, 3), "fc.weight": (3, 8), "fc.bias": (3,)}
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n) for n, s in weights.items()]
    nodes = [helper.make_node("Conv", ["x", "a.weight"], ["a"], name="conv_a", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["ra"]),
             helper.make_node("MaxPool", ["ra"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p", "b.weight"], ["b"], name="conv_b", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["b"], ["rb"]),
             helper.make_node("Flatten", ["rb"], ["f"]),
             helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], transB=1)]
    graph = helper.make_graph(nodes, "small_planes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 2, 2])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, "small_plane_convs.onnx"))
