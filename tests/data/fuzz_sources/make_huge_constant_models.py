"""Writes the hostile models of tests/data/fuzz/fuzz_model_bytes/huge_*.onnx: constant-input Range and
ConstantOfShape nodes whose outputs would need terabytes. The fuzzer found the first (a Range of
0x7a800000088 bytes folded at import, 2026-12-03 CI); the others cover the same path by other routes.

Run: python3 tests/data/fuzz_sources/make_huge_constant_models.py  (needs the onnx package)
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper

OUT = os.path.join(os.path.dirname(__file__), "..", "fuzz", "fuzz_model_bytes")


def scalar(name, value, dtype):
    return helper.make_tensor(name, dtype, [], [value])


def save(name, nodes, initializers, output_type, output_shape):
    graph = helper.make_graph(nodes, name, [], [helper.make_tensor_value_info("y", output_type, output_shape)],
                              initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, os.path.join(OUT, name + ".onnx"))


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
save("huge_range_int64_2e40", [helper.make_node("Range", ["s", "l", "d"], ["y"])],
     [scalar("s", 0, TensorProto.INT64), scalar("l", 2**40, TensorProto.INT64), scalar("d", 1, TensorProto.INT64)],
     TensorProto.INT64, None)
save("huge_range_int64_full_span", [helper.make_node("Range", ["s", "l", "d"], ["y"])],
     [scalar("s", INT64_MIN, TensorProto.INT64), scalar("l", INT64_MAX, TensorProto.INT64),
      scalar("d", 1, TensorProto.INT64)], TensorProto.INT64, None)
save("huge_range_float_1e30", [helper.make_node("Range", ["s", "l", "d"], ["y"])],
     [scalar("s", 0.0, TensorProto.FLOAT), scalar("l", 1e30, TensorProto.FLOAT), scalar("d", 1.0, TensorProto.FLOAT)],
     TensorProto.FLOAT, None)
save("huge_constant_of_shape_2e20_squared", [helper.make_node("ConstantOfShape", ["shape"], ["y"])],
     [helper.make_tensor("shape", TensorProto.INT64, [2], np.array([2**20, 2**20], dtype=np.int64))],
     TensorProto.FLOAT, None)
