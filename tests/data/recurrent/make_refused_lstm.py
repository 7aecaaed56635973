"""Makes lstm_clip.onnx: x (batch, 4, 3) -> Transpose -> LSTM (hidden 2, clip 3.0) -> Y_h -> Squeeze -> Gemm
-> logits (batch, 10). onnxtrain has no clipped cell: `inspect` lists the model past the LSTM and `train`
refuses it, naming the clip attribute (tests/cli_test.cc).

Run with a Python that has onnx: python make_refused_lstm.py
"""
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(0)
inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
         for n, s in [("W", (1, 8, 3)), ("R", (1, 8, 2)), ("fc_w", (10, 2)), ("fc_b", (10,))]]
inits.append(numpy_helper.from_array(np.array([0], dtype=np.int64), "axes"))
graph = helper.make_graph(
    [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2], name="to_time_major"),
     helper.make_node("LSTM", ["xt", "W", "R"], ["", "h"], hidden_size=2, clip=3.0, name="lstm_clip"),
     helper.make_node("Squeeze", ["h", "axes"], ["h2"], name="squeeze"),
     helper.make_node("Gemm", ["h2", "fc_w", "fc_b"], ["logits"], transB=1, name="fc")],
    "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 3])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
model.ir_version = 7  # one Debian's ONNX library reads
save(model, os.path.join(HERE, "lstm_clip.onnx"))
