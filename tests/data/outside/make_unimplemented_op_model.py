"""Makes compress_unk.onnx: x (2, 3) -> Compress (an op onnxtrain has no implementation of) -> Relu -> y, with
the value_info an exporter writes for Compress's output, (unk__2, 3). `run` named a shape problem where the
op was missing (an outside check: DeBERTa-v2's Sign, MaxViT's Einsum); it names the op now.

Run with a Python that has onnx: python make_unimplemented_op_model.py
"""
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

HERE = os.path.dirname(os.path.abspath(__file__))
cond = numpy_helper.from_array(np.array([True, False]), "cond")
graph = helper.make_graph(
    [helper.make_node("Compress", ["x", "cond"], ["cx"], axis=0, name="compress"),
     helper.make_node("Relu", ["cx"], ["y"], name="relu")],
    "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])], [cond],
    value_info=[helper.make_tensor_value_info("cx", TensorProto.FLOAT, ["unk__2", 3])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 7  # one Debian's ONNX library reads, so that its inference types the graph
save(model, os.path.join(HERE, "compress_unk.onnx"))
