#!/usr/bin/python3
"""Build the small ONNX training fixtures of onnxtrain (issue 2).

Run from anywhere:  models/make_fixtures.py

The script works in three stages; by default (no arguments, run by Debian's
/usr/bin/python3 with torch 1.13 + onnx 1.12) it runs all three, re-invoking
itself with the venv interpreter for the stages that need current PyTorch:

  --stage torchscript  (/usr/bin/python3, torch 1.13, onnx 1.12)
        TorchScript exporter, TrainingMode.TRAINING, do_constant_folding=False,
        opset 13 and 17             -> <name>_opset13.onnx, <name>_opset17.onnx
        external-data MLP           -> external/mlp_external.onnx(+.data)
        model-local-function MLP    -> functions/mlp_with_function.onnx
        onnx.checker (Debian onnx) on everything it wrote.
  --stage dynamo       (/work/venv/torchnew/bin/python, current torch)
        torch.onnx.export(..., dynamo=True) of the models in train() state, at
        opset max(18, exporter default)
                                    -> <name>_dynamo.onnx
        onnx.checker (venv onnx) on the dynamo files.
  --stage report       (venv python; falls back to /usr/bin/python3)
        writes fixtures.json, prints size/opset/op histogram per file,
        runs onnxruntime (when importable) on every fixture.

All four models are defined once, below, with code that runs on torch 1.13 and
on current torch.  torch.manual_seed(0) is set before each model is built, so
the weights are reproducible (per torch version).
"""

import argparse
import collections
import copy
import hashlib
import json
import math
import os
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
VENV_PY = os.environ.get("ONNXTRAIN_VENV_PY", "/work/venv/torchnew/bin/python")
FUNC_DOMAIN = "pkg.onnxtrain.test"
MODEL_NAMES = ["cnn", "mlp", "resnet", "transformer"]
DYNAMO_OPSET = 18  # raised to the exporter default in stage_dynamo when higher


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------
class FashionCNN(nn.Module):
    """Quick-start default: (B,1,28,28) -> logits (B,10)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc1 = nn.Linear(16 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.fc2 = nn.Linear(128, 64)
        self.fc3 = nn.Linear(64, 10)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + identity)


class SmallResNet(nn.Module):
    """(B,3,32,32) -> logits (B,10)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.layer1 = BasicBlock(16, 16, 1)
        self.layer2 = BasicBlock(16, 32, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = self.layer2(self.layer1(x))
        x = torch.flatten(self.pool(x), 1)
        return self.fc(x)


class SelfAttention(nn.Module):
    def __init__(self, dim, heads, p):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
        self.attn_drop = nn.Dropout(p)

    def forward(self, x):
        b, t, c = x.shape  # -> Shape/Gather in the export (batch is dynamic)
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        att = self.attn_drop(torch.softmax(att, dim=-1))
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, c)
        return self.proj(y)


class EncoderLayer(nn.Module):
    """Pre-norm encoder layer."""

    def __init__(self, dim, heads, hidden, p):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads, p)
        self.drop1 = nn.Dropout(p)
        self.ln2 = nn.LayerNorm(dim)
        self.ff1 = nn.Linear(dim, hidden)
        self.ff2 = nn.Linear(hidden, dim)
        self.drop2 = nn.Dropout(p)

    def forward(self, x):
        x = x + self.drop1(self.attn(self.ln1(x)))
        x = x + self.drop2(self.ff2(F.gelu(self.ff1(self.ln2(x)))))
        return x


class TinyTransformer(nn.Module):
    """token ids (B,16) int64 -> logits (B,10)."""

    def __init__(self, vocab=100, seq=16, dim=32, heads=4, hidden=64, layers=2, p=0.1):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(1, seq, dim) * 0.02)
        self.drop = nn.Dropout(p)
        self.layers = nn.ModuleList([EncoderLayer(dim, heads, hidden, p) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, ids):
        x = self.drop(self.embed(ids) + self.pos)
        for layer in self.layers:
            x = layer(x)
        x = self.ln(x).mean(dim=1)
        return self.head(x)


# name -> (constructor, example-input builder, input name, output name)
def _img(c, h, w):
    return lambda b: torch.randn(b, c, h, w)


SPECS = {
    "cnn": (FashionCNN, _img(1, 28, 28), "input", "logits"),
    "mlp": (MLP, _img(1, 28, 28), "input", "logits"),
    "resnet": (SmallResNet, _img(3, 32, 32), "input", "logits"),
    "transformer": (TinyTransformer, lambda b: torch.randint(0, 100, (b, 16), dtype=torch.int64),
                    "input_ids", "logits"),
}


def build(name):
    torch.manual_seed(0)
    model = SPECS[name][0]()
    model.train()
    return model


def example_input(name, batch=4):
    g = torch.get_rng_state()
    torch.manual_seed(1)
    x = SPECS[name][1](batch)
    torch.set_rng_state(g)
    return x


def param_counts(model):
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    bn_stats = 0
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            bn_stats += m.running_mean.numel() + m.running_var.numel()
    return params, bn_stats


# --------------------------------------------------------------------------
# Stage 1: TorchScript exporter (torch 1.13, Debian)
# --------------------------------------------------------------------------
def export_torchscript(name, opset, path):
    model = build(name)
    _, _, in_name, out_name = SPECS[name]
    x = example_input(name)
    torch.onnx.export(
        model, (x,), path,
        export_params=True,
        opset_version=opset,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
        input_names=[in_name],
        output_names=[out_name],
        dynamic_axes={in_name: {0: "batch"}, out_name: {0: "batch"}},
    )
    # Tracing runs forward passes in train() state, which updates the BatchNorm
    # running statistics of the module, and the exporter stores those updated values.
    # Put back the freshly-initialised buffers (running_mean = 0, running_var = 1) so
    # every fixture holds the model exactly as constructed.
    import onnx
    from onnx import numpy_helper
    pristine = {k: v for k, v in build(name).state_dict().items() if "running_" in k}
    if pristine:
        m = onnx.load(path)
        for i, t in enumerate(m.graph.initializer):
            if t.name in pristine:
                m.graph.initializer[i].CopyFrom(
                    numpy_helper.from_array(pristine.pop(t.name).numpy(), t.name))
        assert not pristine, "BN buffers not found as initializers: %s" % sorted(pristine)
        onnx.save_model(m, path)


def make_external(src, dst_dir):
    import onnx
    os.makedirs(dst_dir, exist_ok=True)
    model = onnx.load(src)
    dst = os.path.join(dst_dir, "mlp_external.onnx")
    data = os.path.join(dst_dir, "mlp_external.onnx.data")
    if os.path.exists(data):
        os.remove(data)  # save_model appends to an existing data file
    onnx.save_model(model, dst, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="mlp_external.onnx.data", size_threshold=0)
    return dst


def make_function_model(src, dst_dir):
    """MLP whose Linear(+Relu) blocks are model-local functions.

    Functions (domain pkg.onnxtrain.test, version 1):
      ScaledAdd(A, B) -> C        attribute alpha;  C = A + alpha * B
          body: Constant(value_float = @alpha)  <- ref_attr_name
      Linear(X, W, Bias) -> Y     attribute alpha;  Y = X @ W^T + alpha * Bias
          body: Transpose, MatMul, ScaledAdd(alpha = @alpha)  <- nested call + ref
      LinearRelu(X, W, Bias) -> Y attribute alpha;  Y = Relu(Linear(X, W, Bias))
          body: Linear(alpha = @alpha), Relu                   <- nested call
    Graph: Flatten -> LinearRelu -> LinearRelu -> Linear, alpha = 1.0 everywhere,
    so the model computes exactly what the opset-17 MLP export computes.
    """
    import onnx
    from onnx import helper, TensorProto, AttributeProto

    src_model = onnx.load(src)
    g = src_model.graph
    opset = [o for o in src_model.opset_import if o.domain in ("", "ai.onnx")][0].version
    gemms = [n for n in g.node if n.op_type == "Gemm"]
    assert len(gemms) == 3, [n.op_type for n in g.node]
    for n in gemms:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        assert attrs.get("transB", 0) == 1 and attrs.get("transA", 0) == 0, attrs
        assert attrs.get("alpha", 1.0) == 1.0 and attrs.get("beta", 1.0) == 1.0, attrs
    onnx_opset = helper.make_opsetid("", opset)
    local_opset = helper.make_opsetid(FUNC_DOMAIN, 1)

    def ref_attr(name, ref, typ):
        a = AttributeProto()
        a.name = name
        a.ref_attr_name = ref
        a.type = typ
        return a

    const = helper.make_node("Constant", [], ["alpha_t"])
    const.attribute.append(ref_attr("value_float", "alpha", AttributeProto.FLOAT))
    cast_like = helper.make_node("CastLike", ["alpha_t", "B"], ["alpha_c"])
    scaled_add = helper.make_function(
        FUNC_DOMAIN, "ScaledAdd", ["A", "B"], ["C"],
        [const, cast_like,
         helper.make_node("Mul", ["B", "alpha_c"], ["scaled"]),
         helper.make_node("Add", ["A", "scaled"], ["C"])],
        [onnx_opset], ["alpha"],
        doc_string="C = A + alpha * B (alpha read through ref_attr_name)")

    sa_call = helper.make_node("ScaledAdd", ["mm", "Bias"], ["Y"], domain=FUNC_DOMAIN)
    sa_call.attribute.append(ref_attr("alpha", "alpha", AttributeProto.FLOAT))
    linear = helper.make_function(
        FUNC_DOMAIN, "Linear", ["X", "W", "Bias"], ["Y"],
        [helper.make_node("Transpose", ["W"], ["Wt"], perm=[1, 0]),
         helper.make_node("MatMul", ["X", "Wt"], ["mm"]),
         sa_call],
        [onnx_opset, local_opset], ["alpha"],
        doc_string="Y = X @ W^T + alpha * Bias (W is [out, in] like torch.nn.Linear)")

    lin_call = helper.make_node("Linear", ["X", "W", "Bias"], ["h"], domain=FUNC_DOMAIN)
    lin_call.attribute.append(ref_attr("alpha", "alpha", AttributeProto.FLOAT))
    linear_relu = helper.make_function(
        FUNC_DOMAIN, "LinearRelu", ["X", "W", "Bias"], ["Y"],
        [lin_call, helper.make_node("Relu", ["h"], ["Y"])],
        [onnx_opset, local_opset], ["alpha"],
        doc_string="Y = Relu(Linear(X, W, Bias))")

    in_name = g.input[0].name
    out_name = g.output[0].name
    nodes = [helper.make_node("Flatten", [in_name], ["flat"], axis=1, name="flatten")]
    cur = "flat"
    for i, gm in enumerate(gemms):
        w, b = gm.input[1], gm.input[2]
        last = i == len(gemms) - 1
        out = out_name if last else "h%d" % (i + 1)
        op = "Linear" if last else "LinearRelu"
        nodes.append(helper.make_node(op, [cur, w, b], [out], domain=FUNC_DOMAIN,
                                      name="fc%d" % (i + 1), alpha=1.0))
        cur = out
    graph = helper.make_graph(nodes, "mlp_with_function", [copy.deepcopy(g.input[0])],
                              [copy.deepcopy(g.output[0])],
                              initializer=[copy.deepcopy(t) for t in g.initializer])
    model = helper.make_model(graph, opset_imports=[onnx_opset, local_opset],
                              functions=[scaled_add, linear, linear_relu],
                              producer_name="onnxtrain models/make_fixtures.py",
                              doc_string="MLP with model-local functions (from mlp_opset17.onnx)")
    model.ir_version = max(src_model.ir_version, 8)
    os.makedirs(dst_dir, exist_ok=True)
    dst = os.path.join(dst_dir, "mlp_with_function.onnx")
    onnx.save_model(model, dst)
    return dst


def stage_torchscript():
    import onnx
    print("[torchscript] torch %s, onnx %s" % (torch.__version__, onnx.__version__))
    written = []
    for name in MODEL_NAMES:
        for opset in (13, 17):
            path = os.path.join(HERE, "%s_opset%d.onnx" % (name, opset))
            export_torchscript(name, opset, path)
            written.append(path)
    written.append(make_external(os.path.join(HERE, "mlp_opset17.onnx"),
                                 os.path.join(HERE, "external")))
    written.append(make_function_model(os.path.join(HERE, "mlp_opset17.onnx"),
                                       os.path.join(HERE, "functions")))
    for path in written:
        onnx.checker.check_model(path, full_check=True)  # path form handles external data
        print("[torchscript] checker OK (onnx %s, full_check): %s"
              % (onnx.__version__, os.path.relpath(path, HERE)))


# --------------------------------------------------------------------------
# Stage 2: dynamo exporter (current torch, venv)
# --------------------------------------------------------------------------
def stage_dynamo():
    """Two files per model:
      <name>_dynamo.onnx      optimize=False: every parameter and BN buffer is an
                              initializer under its PyTorch name (fixture for training)
      <name>_dynamo_opt.onnx  the exporter's defaults (optimize=True): what a user gets;
                              the optimizer treats initializers as constants and folds
                              them (Transpose(W) pre-computed, identical tensors
                              deduplicated, inference BatchNormalization fused away).
    The model is in train() state.  TorchScript's `training=` argument is deprecated
    and ignored by the dynamo path; onnxscript's torch_lib lowers aten batch norm
    with training forced to False (inference BatchNormalization), Dropout stays in
    training mode (training_mode input = True).
    """
    import onnx
    import warnings
    from torch.onnx import _constants
    # Opset 18 (the torch_lib opset) or the exporter's default if that is higher
    # (torch 2.15: default 20; the exporter then runs the ONNX version converter).
    global DYNAMO_OPSET
    DYNAMO_OPSET = max(18, getattr(_constants, "ONNX_DEFAULT_OPSET", 18))
    print("[dynamo] torch %s, onnx %s, opset %d"
          % (torch.__version__, onnx.__version__, DYNAMO_OPSET))
    for name in MODEL_NAMES:
        for optimize, suffix in ((False, "dynamo"), (True, "dynamo_opt")):
            model = build(name)  # train(): BN uses batch stats, Dropout is active
            _, _, in_name, out_name = SPECS[name]
            x = example_input(name)
            path = os.path.join(HERE, "%s_%s.onnx" % (name, suffix))
            arg = SPECS[name][0].forward.__code__.co_varnames[1]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prog = torch.onnx.export(
                    model, (x,), None,
                    dynamo=True,
                    opset_version=DYNAMO_OPSET,
                    input_names=[in_name],
                    output_names=[out_name],
                    dynamic_shapes={arg: {0: torch.export.Dim("batch")}},
                    external_data=False,
                    optimize=optimize,
                )
            prog.save(path, external_data=False)
            m = onnx.load(path)
            assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer)
            onnx.checker.check_model(m, full_check=True)
            print("[dynamo] checker OK (onnx %s, full_check): %s  model-local functions=%d"
                  % (onnx.__version__, os.path.basename(path), len(m.functions)))
    # The newest opset onnxtrain reads (21), via ONNX's own version converter.
    from onnx import version_converter
    src = onnx.load(os.path.join(HERE, "transformer_dynamo.onnx"))
    converted = version_converter.convert_version(src, 21)
    onnx.checker.check_model(converted, full_check=True)
    onnx.save(converted, os.path.join(HERE, "transformer_opset21.onnx"))
    print("[dynamo] transformer_opset21.onnx: converted from opset %d"
          % next(o.version for o in src.opset_import if o.domain in ("", "ai.onnx")))


# --------------------------------------------------------------------------
# Stage 3: report -> fixtures.json
# --------------------------------------------------------------------------
def cnn_flops():
    """Per-sample forward FLOPs of FashionCNN, by hand."""
    rows = []

    def conv(name, cin, cout, k, hout, wout):
        mac = 2 * cin * k * k * cout * hout * wout
        rows.append((name, "Conv", mac + cout * hout * wout))

    def lin(name, fin, fout):
        rows.append((name, "Gemm", 2 * fin * fout + fout))

    conv("conv1", 1, 8, 3, 28, 28)
    rows.append(("relu1", "Relu", 8 * 28 * 28))
    rows.append(("pool1", "MaxPool", 8 * 14 * 14))
    conv("conv2", 8, 16, 3, 14, 14)
    rows.append(("relu2", "Relu", 16 * 14 * 14))
    rows.append(("pool2", "MaxPool", 16 * 7 * 7))
    rows.append(("flatten", "Flatten", 0))
    lin("fc1", 16 * 7 * 7, 64)
    rows.append(("relu3", "Relu", 64))
    lin("fc2", 64, 10)
    total = sum(r[2] for r in rows)
    pool_cmp = (8 * 14 * 14 + 16 * 7 * 7) * (2 * 2 - 1)
    pool_out = 8 * 14 * 14 + 16 * 7 * 7
    return {
        "per_layer": [{"layer": n, "op": o, "flops": f} for n, o, f in rows],
        "total": total,
        "total_if_maxpool_counts_kh_kw_minus_1_comparisons": total - pool_out + pool_cmp,
    }


def mlp_flops():
    rows = [("fc1", 2 * 784 * 128 + 128), ("relu1", 128), ("fc2", 2 * 128 * 64 + 64),
            ("relu2", 64), ("fc3", 2 * 64 * 10 + 10)]
    return {"per_layer": [{"layer": n, "flops": f} for n, f in rows],
            "total": sum(f for _, f in rows)}


DTYPE_NAMES = {1: "float32", 7: "int64", 6: "int32", 10: "float16", 11: "float64", 16: "bfloat16"}


def _shape(vi):
    dims = []
    for d in vi.type.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return dims


def _op_hist(model):
    hist = collections.Counter()
    for n in model.graph.node:
        hist["%s:%s" % (n.domain or "ai.onnx", n.op_type)] += 1
    return hist


def _func_op_hist(model):
    hist = collections.Counter()
    for f in model.functions:
        for n in f.node:
            hist["%s:%s" % (n.domain or "ai.onnx", n.op_type)] += 1
    return hist


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        h.update(fh.read())
    return h.hexdigest()


def _run_ort(path, name):
    """Run the file in onnxruntime (batch 3) and compare with the PyTorch model built
    by this interpreter (same seed) in train() and eval() state.  Models with Dropout
    are not compared (random masks)."""
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError:
        return None
    res = {"onnxruntime": ort.__version__}
    try:
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        xt = example_input(name, batch=3)
        outs = sess.run(None, {sess.get_inputs()[0].name: xt.numpy()})
    except Exception as e:  # noqa: BLE001 - recorded in the report
        res.update(ok=False, error=str(e).splitlines()[0][:300])
        return res
    res.update(ok=True, output_shapes_batch3=[list(o.shape) for o in outs],
               finite=bool(all(np.isfinite(o).all() for o in outs if o.dtype.kind == "f")))
    if any(isinstance(mod, nn.Dropout) for mod in build(name).modules()):
        res["compared_with_torch"] = "no (Dropout active in the export)"
        return res
    with torch.no_grad():
        for state in ("train", "eval"):
            model = build(name)  # fresh: a train() forward updates BN running stats
            getattr(model, state)()
            ref = model(xt).numpy()
            res["max_abs_diff_vs_torch_%s" % state] = float(np.abs(ref - outs[0]).max())
    res["torch_for_comparison"] = torch.__version__
    return res


def _training_semantics(model):
    """How BatchNormalization and Dropout nodes behave: training or inference form."""
    from onnx import numpy_helper, helper
    consts = {t.name: t for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    consts[n.output[0]] = a.t
    out = {}
    bns = [n for n in model.graph.node if n.op_type == "BatchNormalization"]
    if bns:
        forms = collections.Counter()
        for n in bns:
            attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
            outs = len([o for o in n.output if o])
            if attrs.get("training_mode", 0) == 1:
                forms["training_mode=1 (batch statistics), %d outputs" % outs] += 1
            elif outs > 1:
                forms["opset<14 training form (batch statistics), %d outputs" % outs] += 1
            else:
                forms["inference (running statistics), 1 output"] += 1
        out["BatchNormalization"] = dict(forms)
    drops = [n for n in model.graph.node if n.op_type == "Dropout"]
    if drops:
        forms = collections.Counter()
        for n in drops:
            ratio = training = None
            if len(n.input) > 1 and n.input[1] in consts:
                ratio = round(float(numpy_helper.to_array(consts[n.input[1]])), 6)
            if len(n.input) > 2 and n.input[2] in consts:
                training = bool(numpy_helper.to_array(consts[n.input[2]]))
            forms["ratio=%s training_mode=%s outputs=%d"
                  % (ratio, training, len([o for o in n.output if o]))] += 1
        out["Dropout"] = dict(forms)
    return out


def _param_presence(name, model):
    """Which PyTorch parameters/BN buffers are initializers with the same name and
    the same values as the PyTorch model built here (same seed)."""
    from onnx import numpy_helper
    tm = build(name)
    inits = {t.name: t for t in model.graph.initializer}
    missing, differ = [], []
    for pname, p in list(tm.named_parameters()) + [
            (bn, b) for bn, b in tm.named_buffers() if "running_" in bn]:
        t = inits.get(pname)
        if t is None:
            missing.append(pname)
            continue
        arr = numpy_helper.to_array(t)
        if list(arr.shape) != list(p.shape) or abs(arr - p.detach().numpy()).max() > 0:
            differ.append(pname)
    return {"missing": missing, "values_differ": differ,
            "present_and_equal": len(inits.keys() & {n for n, _ in tm.named_parameters()})
            - len([d for d in differ if d in dict(tm.named_parameters())])}


def stage_report():
    import onnx
    files = []
    for name in MODEL_NAMES:
        for suffix in ("opset13", "opset17", "dynamo", "dynamo_opt"):
            files.append((name, "%s_%s.onnx" % (name, suffix)))
    files.append(("mlp", "external/mlp_external.onnx"))
    files.append(("mlp", "functions/mlp_with_function.onnx"))
    files.append(("transformer", "transformer_opset21.onnx"))

    counts = {n: param_counts(build(n)) for n in MODEL_NAMES}
    entries = {}
    all_ops = set()
    for name, rel in files:
        path = os.path.join(HERE, rel)
        if not os.path.exists(path):
            print("MISSING %s" % rel)
            continue
        m = onnx.load(path)  # loads external data from the same folder
        inits = {t.name for t in m.graph.initializer}
        real_inputs = [i for i in m.graph.input if i.name not in inits]
        opsets = {(o.domain or "ai.onnx"): o.version for o in m.opset_import}
        hist = _op_hist(m)
        fhist = _func_op_hist(m)
        all_ops.update(hist)
        all_ops.update(fhist)
        float_init = sum(int(math.prod(t.dims)) for t in m.graph.initializer
                         if t.data_type == onnx.TensorProto.FLOAT)
        params, bn = counts[name]
        size = os.path.getsize(path)
        e = {
            "model": name,
            "exporter": ("transformer_dynamo.onnx converted to opset 21 by onnx.version_converter"
                         if rel.endswith("_opset21.onnx")
                         else "torch.onnx dynamo=True, optimize=False" if rel.endswith("_dynamo.onnx")
                         else "torch.onnx dynamo=True, optimize=True (defaults)"
                         if rel.endswith("_dynamo_opt.onnx")
                         else "derived from mlp_opset17.onnx with the onnx helper API"
                         if "/" in rel else "torch.onnx TorchScript, TrainingMode.TRAINING"),
            "producer": "%s %s" % (m.producer_name, m.producer_version),
            "ir_version": m.ir_version,
            "opset": opsets.get("ai.onnx"),
            "opset_imports": opsets,
            "size_bytes": size,
            "sha256": _sha256(path),
            "trainable_parameters": params,
            "bn_running_stat_elements": bn,
            "float_initializer_elements": float_init,
            "num_initializers": len(m.graph.initializer),
            "inputs": [{"name": i.name, "shape": _shape(i),
                        "dtype": DTYPE_NAMES.get(i.type.tensor_type.elem_type,
                                                 i.type.tensor_type.elem_type)}
                       for i in real_inputs],
            "outputs": [{"name": o.name, "shape": _shape(o),
                         "dtype": DTYPE_NAMES.get(o.type.tensor_type.elem_type,
                                                  o.type.tensor_type.elem_type)}
                        for o in m.graph.output],
            "num_nodes": len(m.graph.node),
            "op_histogram": dict(sorted(hist.items())),
            "model_local_functions": ["%s:%s" % (f.domain, f.name) for f in m.functions],
        }
        if fhist:
            e["function_body_op_histogram"] = dict(sorted(fhist.items()))
        if rel.startswith("external/"):
            e["external_data"] = {"location": "mlp_external.onnx.data",
                                  "data_size_bytes": os.path.getsize(
                                      os.path.join(HERE, "external", "mlp_external.onnx.data"))}
        if name == "cnn":
            e["forward_flops_per_sample"] = cnn_flops()["total"]
        if name == "mlp":
            e["forward_flops_per_sample"] = mlp_flops()["total"]
        ort_res = _run_ort(path, name)
        e["pytorch_parameters_by_name"] = _param_presence(name, m)
        sem = _training_semantics(m)
        if sem:
            e["training_semantics"] = sem
        if ort_res is not None:
            e["onnxruntime_check"] = ort_res
        entries[rel] = e

        print("\n== %s  (%d bytes, opset %s, ir %d, %d nodes, params %d, bn stats %d, "
              "float init elems %d)" % (rel, size, e["opset"], m.ir_version, len(m.graph.node),
                                        params, bn, float_init))
        print("   in  %s" % e["inputs"])
        print("   out %s" % e["outputs"])
        print("   ops " + ", ".join("%s x%d" % kv for kv in sorted(hist.items())))
        if fhist:
            print("   function ops " + ", ".join("%s x%d" % kv for kv in sorted(fhist.items())))
            print("   functions %s" % e["model_local_functions"])
        print("   params by name %s" % e["pytorch_parameters_by_name"])
        if sem:
            print("   semantics %s" % sem)
        if ort_res is not None:
            print("   onnxruntime %s" % ort_res)

    doc = {
        "generator": "models/make_fixtures.py",
        "seed": "torch.manual_seed(0) before building each model; example inputs use seed 1",
        "parameter_rule": ("trainable_parameters = sum(p.numel() for p in model.parameters()) "
                           "in PyTorch; BatchNorm running_mean/running_var are buffers, counted "
                           "separately in bn_running_stat_elements (num_batches_tracked is not "
                           "counted and not exported). float_initializer_elements is what the "
                           "file holds as float initializers (exporters may add constants or "
                           "drop/duplicate tensors, so it may differ from the sum)."),
        "flop_rule": ("Forward FLOPs per sample. A multiply-add counts as 2 FLOPs. "
                      "Conv: 2*Cin*kh*kw*Cout*Hout*Wout + Cout*Hout*Wout for the bias. "
                      "Linear/Gemm: 2*in*out + out for the bias. Relu: 1 FLOP per output "
                      "element. MaxPool: 1 FLOP per OUTPUT element (convention used in "
                      "'total'; the alternative kh*kw-1 comparisons per output element is "
                      "given as 'total_if_maxpool_counts_kh_kw_minus_1_comparisons'). "
                      "Flatten/Reshape: 0."),
        "flops": {"cnn": cnn_flops(), "mlp": mlp_flops()},
        "files": entries,
    }
    with open(os.path.join(HERE, "fixtures.json"), "w") as fh:
        json.dump(doc, fh, indent=2, sort_keys=False)
        fh.write("\n")
    print("\nall op types across fixtures: %s" % sorted(all_ops))
    print("wrote %s" % os.path.join(HERE, "fixtures.json"))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stage", choices=["all", "torchscript", "dynamo", "report"], default="all")
    args = ap.parse_args()
    if args.stage == "torchscript":
        stage_torchscript()
    elif args.stage == "dynamo":
        stage_dynamo()
    elif args.stage == "report":
        stage_report()
    else:
        stage_torchscript()
        me = os.path.abspath(__file__)
        if os.path.exists(VENV_PY):
            subprocess.check_call([VENV_PY, me, "--stage", "dynamo"])
            subprocess.check_call([VENV_PY, me, "--stage", "report"])
        else:
            print("WARNING: %s not found: no dynamo exports; report with %s"
                  % (VENV_PY, sys.executable))
            stage_report()


if __name__ == "__main__":
    main()
