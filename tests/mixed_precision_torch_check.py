# PyTorch's own bf16 autocast error on the cnn fixture, the yardstick of mixed_precision_test's bounds:
# the first-step gradients of models/cnn_opset17.onnx (its initial weights) on one random batch of 16,
# under torch.autocast("cpu", torch.bfloat16) against float32, as ‖g_bf16 − g_fp32‖ / ‖g_fp32‖ per parameter.
# Run: /usr/bin/python3 tests/mixed_precision_torch_check.py  (torch 1.13: conv1.weight 0.098, conv2.weight
# 0.046, fc1.weight 0.004; the numbers move with the batch, the early convolutions stay the worst).
import os

import torch, onnx, numpy as np
from onnx import numpy_helper
torch.manual_seed(0)
m = onnx.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'models', 'cnn_opset17.onnx'))
W = {i.name: torch.tensor(numpy_helper.to_array(i)) for i in m.graph.initializer}
def net(x, P):
    F = torch.nn.functional
    y = F.max_pool2d(F.relu(F.conv2d(x, P['conv1.weight'], P['conv1.bias'], padding=1)), 2)
    y = F.max_pool2d(F.relu(F.conv2d(y, P['conv2.weight'], P['conv2.bias'], padding=1)), 2)
    y = F.relu(F.linear(y.flatten(1), P['fc1.weight'], P['fc1.bias']))
    return F.linear(y, P['fc2.weight'], P['fc2.bias'])
x = torch.randn(16, 1, 28, 28); t = torch.randint(0, 10, (16,))
def grads(dtype):
    P = {k: v.clone().requires_grad_() for k, v in W.items()}
    if dtype is None:
        loss = torch.nn.functional.cross_entropy(net(x, P), t)
    else:
        with torch.autocast('cpu', dtype=dtype):
            out = net(x, P)
        loss = torch.nn.functional.cross_entropy(out.float(), t)
    loss.backward()
    return {k: p.grad for k, p in P.items()}
g32 = grads(None); g16 = grads(torch.bfloat16)
for k in g32: print(k, float((g16[k]-g32[k]).norm()/g32[k].norm()))
