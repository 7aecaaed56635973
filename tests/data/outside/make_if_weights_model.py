"""Makes if_weights.onnx: x (batch, 4) -> If (a constant condition) whose then-branch multiplies x by a (4, 3)
initializer of its own and whose else-branch by a (4, 3) Constant node: 24 float elements inside If bodies,
which `inspect` counted nowhere (an outside check). onnxtrain cannot run If.

Run with a Python that has onnx: python make_if_weights_model.py
"""
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(0)
out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])]
then_branch = helper.make_graph([helper.make_node("MatMul", ["x", "w_then"], ["y"])], "then", [], out,
                                [numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w_then")])
else_branch = helper.make_graph(
    [helper.make_node("Constant", [], ["w_else"],
                      value=numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32))),
     helper.make_node("MatMul", ["x", "w_else"], ["y"])], "else", [], out)
graph = helper.make_graph(
    [helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_branch, else_branch=else_branch)],
    "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])], out,
    [numpy_helper.from_array(np.array(True), "cond")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 7
save(model, os.path.join(HERE, "if_weights.onnx"))
