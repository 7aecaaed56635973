"""What the PyTorch parity fixture scripts share (tests/data/einsum/, scatter_nd/, tile/; read by
tests/pytorch_reference.h): a model exported by both of torch's exporters with a dynamic batch, and
PyTorch's first-step loss and parameter gradients for one batch in float32 and float64.

    from pytorch_reference import export_both, write_reference   # with tests/data on sys.path
    export_both(model, x, HERE, "tile", "Tile")          # tile_ts.onnx (opset 17), tile_dynamo.onnx
    write_reference(os.path.join(HERE, "tile_reference.npz"), model, x, labels)
"""
import copy
import os

import numpy as np
import onnx
import torch
import torch.nn.functional as F


def gradients(model, x, labels):
    model.zero_grad()
    loss = F.cross_entropy(model(x), labels)
    loss.backward()
    return loss.item(), {n: p.grad.detach().numpy().copy() for n, p in model.named_parameters()}


def export_both(model, x, directory, stem, op_type, **torchscript_options):
    """STEM_ts.onnx (TorchScript, opset 17) and STEM_dynamo.onnx (dynamo, optimize=False), input `input`,
    output `logits`, dynamic batch; each must hold an `op_type` node and name every parameter as PyTorch."""
    for name, dynamo in ((stem + "_ts.onnx", False), (stem + "_dynamo.onnx", True)):
        path = os.path.join(directory, name)
        if dynamo:
            torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["logits"], dynamo=True,
                              optimize=False, dynamic_shapes=({0: torch.export.Dim("batch")},), external_data=False)
        else:
            torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["logits"], dynamo=False,
                              opset_version=17, dynamic_axes={"input": {0: "batch"}}, **torchscript_options)
        graph = onnx.load(path).graph
        assert any(n.op_type == op_type for n in graph.node), f"{path} has no {op_type} node"
        names = {i.name for i in graph.initializer}
        missing = [n for n, _ in model.named_parameters() if n not in names]
        assert not missing, f"{path} names parameters otherwise: {missing} not among {sorted(names)}"


def write_reference(path, model, x, labels):
    """input, labels (int64), loss32, loss64, grad32/NAME and grad64/NAME for every parameter."""
    loss32, g32 = gradients(model, x, labels)
    loss64, g64 = gradients(copy.deepcopy(model).double(), x.double(), labels)
    arrays = {"input": x.numpy(), "labels": labels.numpy(), "loss32": np.array(loss32), "loss64": np.array(loss64)}
    for n in g32:
        arrays["grad32/" + n] = g32[n]
        arrays["grad64/" + n] = g64[n]
    np.savez(path, **arrays)
    print(os.path.basename(path), "loss float32", loss32, "float64", loss64)
