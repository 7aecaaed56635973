"""Makes small_plane_cnn.onnx: a BatchNorm-free CNN over 4x4 inputs whose convolutions have output planes
of 2x2 (kernels/onednn/tap_product_conv.h) and 1x1 (single_pixel_conv.h), for the tests of what those
kernels derive from the weights (tests/pipeline_trainer_test.cc).

    python3 make_small_plane_cnn.py     # needs the onnx package; writes next to this script
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(5)


def weight(name, *shape):
    fan_in = int(np.prod(shape[1:]))
    return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32), name)


initializers = [
    weight("conv1.weight", 8, 4, 3, 3), numpy_helper.from_array(np.zeros(8, np.float32), "conv1.bias"),
    weight("conv2.weight", 8, 8, 3, 3), numpy_helper.from_array(np.zeros(8, np.float32), "conv2.bias"),
    weight("conv3.weight", 16, 8, 3, 3), numpy_helper.from_array(np.zeros(16, np.float32), "conv3.bias"),
    weight("fc.weight", 10, 16), numpy_helper.from_array(np.zeros(10, np.float32), "fc.bias"),
]
nodes = [
    # 4x4 -> 2x2 (stride 2), 2x2 -> 2x2: tap products; 2x2 -> 1x1 (stride 2): a single pixel
    helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
    helper.make_node("Relu", ["c1"], ["r1"]),
    helper.make_node("Conv", ["r1", "conv2.weight", "conv2.bias"], ["c2"], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c2"], ["r2"]),
    helper.make_node("Conv", ["r2", "conv3.weight", "conv3.bias"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
    helper.make_node("Relu", ["c3"], ["r3"]),
    helper.make_node("Flatten", ["r3"], ["flat"]),
    helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], transB=1),
]
graph = helper.make_graph(
    nodes, "small_plane_cnn",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 4, 4, 4])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
    initializers)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="make_small_plane_cnn.py")
onnx.checker.check_model(model)
onnx.save(model, os.path.join(os.path.dirname(os.path.abspath(__file__)), "small_plane_cnn.onnx"))
