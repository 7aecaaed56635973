#!/work/venv/torchnew/bin/python
"""Tiny Hugging Face transformers exported to ONNX, with PyTorch reference gradients.

What it makes, in models/transformers/ (see README.md there, which this script writes):

  NAME_torchscript.onnx   torch.onnx.export(dynamo=False), opset 17, TrainingMode.TRAINING,
                          do_constant_folding=False, dynamic axes batch (and seq for token models)
  NAME_dynamo.onnx        torch.onnx.export(dynamo=True), opset 18, optimize=False, dynamic batch;
                          every weight embedded in the one file, per-node metadata_props and
                          doc_strings removed (the graph otherwise as exported)
  NAME_reference.npz      one per model, shared by both exports: example inputs (under the graph
                          input names), labels, loss64/loss32 and the float64 and float32
                          gradient of every trainable parameter, keyed grad64/<param> and
                          grad32/<param> by the PyTorch parameter name (without the wrapper's
                          "hf." prefix), deflated, written with fixed zip timestamps;
                          for gpt2/bert/bert_masked/vit/llama also 10 AdamW steps on that batch:
                          adamw_losses64/32 and the weights after, adamw_after64/32/<param>
  initializers.json       {"NAME_EXPORT.onnx": {"<initializer>": "<param>", ...}, ...}: every
                          trainable initializer of every ONNX file and the parameter it holds

for NAME in gpt2, bert, bert_masked, vit, llama, t5. Every model is 2 layers, hidden 64,
4 heads, intermediate 128, vocab 256, 64 positions, all dropout 0, built after
torch.manual_seed(0); the examples are batch 2 (sequence 16, or 3x32x32 images), drawn after
torch.manual_seed(1). bert_masked is bert (the same config, hence the same weights) exported
with three graph inputs, input_ids, attention_mask and token_type_ids; its example pads the
second row (attention_mask 0 and input_ids 0 = [PAD] on its last 5 positions) and sets
token_type_ids 0 on the first half of each row, 1 on the rest.

Run from anywhere, with the venv of torch 2.x (see README.md for its packages):

  /work/venv/torchnew/bin/python models/make_transformers.py                  # all stages
  /work/venv/torchnew/bin/python models/make_transformers.py --stage export     # ONNX files
  /work/venv/torchnew/bin/python models/make_transformers.py --stage reference  # .npz + .json
  /work/venv/torchnew/bin/python models/make_transformers.py --stage report     # README.md
  ... --models gpt2,bert                                                        # a subset

The report stage runs onnxruntime on every file against PyTorch (float32, atol 1e-4), checks
initializers.json (each listed initializer equals its parameter exactly, every parameter is
listed once per file, the npz holds both gradients in the initializer's shape), checks the
gradient and AdamW judging rules against a second float32 run, checks that the attention mask
works (bert_masked, in onnxruntime: new input_ids at the masked positions leave the padded
row's logits within 1e-5; without the mask they, and flipped token_type_ids, move them > 1e-4),
prints opset, op histogram and `onnxtrain inspect FILE` (build/release/tools/onnxtrain, when
built) per file, writes README.md (only when run for every model) and exits 1 when a check
failed.
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "transformers")
REPO = os.path.dirname(HERE)
ONNXTRAIN = os.path.join(REPO, "build", "release", "tools", "onnxtrain")
STATUS_FILE = os.path.join(OUT, "export_status.json")
INITIALIZERS_FILE = os.path.join(OUT, "initializers.json")
# The wrapper's submodule: torch parameter "hf.X" is reference parameter "X".
PARAM_PREFIX = "hf."
# Gradient judging rule (README.md): per tensor, max|g - grad64| <= JUDGE_FACTOR *
# max|grad32 - grad64| + JUDGE_FLOOR * max|grad64| + JUDGE_MODEL_FLOOR * G, where G is the
# largest max|grad64| over all parameters of the model.
JUDGE_FACTOR, JUDGE_FLOOR, JUDGE_MODEL_FLOOR = 10.0, 1e-6, 1e-9
# AdamW reference (README.md): ADAMW_STEPS steps of torch.optim.AdamW(**ADAMW) on the one
# example batch, float64 and float32, for ADAMW_MODELS. adamw_after64/32 hold every parameter
# when the npz stays within ADAMW_MAX_NPZ_BYTES, else only those of <= ADAMW_SMALL_PARAM values.
ADAMW_MODELS = ["gpt2", "bert", "bert_masked", "vit", "llama"]
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
ADAMW_STEPS = 10
ADAMW_MAX_NPZ_BYTES = 2500000
ADAMW_SMALL_PARAM = 20000
# Weight judging rule (README.md): per tensor, max|w - w64| <= JUDGE_FACTOR * max|w32 - w64| +
# JUDGE_FLOOR * max|w64| + ADAMW_STEP_FLOOR * steps * lr, plus steps * lr * JUDGE_MODEL_FLOOR *
# G / eps for a tensor with a roundoff-only gradient element (0 < |grad64| <= ROUNDOFF_ZERO * G:
# exact gradient 0, the attention key biases). Losses: per step, the gradient rule's loss rule.
ADAMW_STEP_FLOOR = 1e-4
ROUNDOFF_ZERO = 1e-12

MODEL_NAMES = ["gpt2", "bert", "bert_masked", "vit", "llama", "t5"]
EXPORTS = ["torchscript", "dynamo"]
TORCHSCRIPT_OPSET = 17
DYNAMO_OPSET = 18
BATCH, SEQ, IMAGE, NUM_LABELS, VOCAB = 2, 16, 32, 10, 256
# bert_masked's example: the last PADDED positions of row 1 (the second row) are padding
# (attention_mask 0, input_ids PAD_ID, BERT's pad_token_id).
PADDED, PAD_ID = 5, 0
MAX_FILE_BYTES = 5 * 1024 * 1024
ATOL = 1e-4
# Masking check (report stage, models with an attention_mask input): in onnxruntime, new
# input_ids at the masked positions of the padded row move its logits by at most MASK_ATOL;
# the same new ids with an all-ones attention_mask, and flipped token_type_ids, move them by
# more than MASK_MOVES (the logits of these untrained models are only ~0.03 in size).
MASK_ATOL, MASK_MOVES = 1e-5, 1e-4
# Eager attention: the plain MatMul/Softmax reference implementation of each model
# (not the fused SDPA path that transformers picks by default).
ATTN = "eager"

COMMON = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
              intermediate_size=128, max_position_embeddings=64, attn_implementation=ATTN)


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------
class LogitsOnly(nn.Module):
    """forward(*inputs) -> logits tensor of the wrapped Hugging Face model."""

    def __init__(self, hf, input_names, use_cache):
        super().__init__()
        self.hf = hf
        self.input_names = list(input_names)
        self.extra = {"return_dict": False}
        if use_cache:
            self.extra["use_cache"] = False

    def forward(self, *inputs):
        kwargs = dict(zip(self.input_names, inputs))
        return self.hf(**kwargs, **self.extra)[0]


class TokenModel(LogitsOnly):
    def forward(self, input_ids):
        return super().forward(input_ids)


class ImageModel(LogitsOnly):
    def forward(self, pixel_values):
        return super().forward(pixel_values)


class MaskedTokenModel(LogitsOnly):
    def forward(self, input_ids, attention_mask, token_type_ids):
        return super().forward(input_ids, attention_mask, token_type_ids)


class Seq2SeqModel(LogitsOnly):
    def forward(self, input_ids, decoder_input_ids):
        return super().forward(input_ids, decoder_input_ids)


def hf_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_inner=128,
                     n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1, attn_implementation=ATTN)
    return TokenModel(GPT2LMHeadModel(cfg), ["input_ids"], use_cache=True)


def bert_classifier():
    from transformers import BertConfig, BertForSequenceClassification
    cfg = BertConfig(**COMMON, num_labels=NUM_LABELS, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, classifier_dropout=0.0)
    assert cfg.pad_token_id == PAD_ID, cfg.pad_token_id
    return BertForSequenceClassification(cfg)


def hf_bert():
    return TokenModel(bert_classifier(), ["input_ids"], use_cache=False)


def hf_bert_masked():
    return MaskedTokenModel(bert_classifier(), INPUTS["bert_masked"], use_cache=False)


def hf_vit():
    from transformers import ViTConfig, ViTForImageClassification
    cfg = ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=128, image_size=IMAGE, patch_size=8, num_channels=3,
                    num_labels=NUM_LABELS, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0, attn_implementation=ATTN)
    return ImageModel(ViTForImageClassification(cfg), ["pixel_values"], use_cache=False)


def hf_llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(**COMMON, num_key_value_heads=2, hidden_act="silu",
                      attention_dropout=0.0, tie_word_embeddings=False)
    return TokenModel(LlamaForCausalLM(cfg), ["input_ids"], use_cache=True)


def hf_t5():
    from transformers import T5Config, T5ForConditionalGeneration
    cfg = T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                   num_decoder_layers=2, num_heads=4, dropout_rate=0.0,
                   decoder_start_token_id=0, attn_implementation=ATTN)
    return Seq2SeqModel(T5ForConditionalGeneration(cfg), ["input_ids", "decoder_input_ids"],
                        use_cache=True)


BUILDERS = {"gpt2": hf_gpt2, "bert": hf_bert, "bert_masked": hf_bert_masked, "vit": hf_vit,
            "llama": hf_llama, "t5": hf_t5}
# Per model: graph inputs and the kind of labels/logits ("token": (B,T,V), "class": (B,10)).
INPUTS = {"gpt2": ["input_ids"], "bert": ["input_ids"],
          "bert_masked": ["input_ids", "attention_mask", "token_type_ids"],
          "vit": ["pixel_values"], "llama": ["input_ids"],
          "t5": ["input_ids", "decoder_input_ids"]}
LABEL_KIND = {"gpt2": "token", "bert": "class", "bert_masked": "class", "vit": "class",
              "llama": "token", "t5": "token"}
DESCRIPTION = {
    "gpt2": "GPT2LMHeadModel: learned positions, pre-LN, GELU (tanh) MLP, Conv1D (addmm) "
            "projections, causal mask, lm_head tied to wte",
    "bert": "BertForSequenceClassification: word+position+token-type embeddings, post-LN, "
            "GELU (erf), pooler (tanh) and classifier",
    "bert_masked": "the bert model (same config and weights) with `attention_mask` (padded "
                   "keys get the dtype's lowest value added to their attention scores) and "
                   "`token_type_ids` as graph inputs",
    "vit": "ViTForImageClassification: 8x8 patch Conv, CLS token, learned positions, pre-LN, "
           "GELU, classifier on the CLS token",
    "llama": "LlamaForCausalLM: RMSNorm, rotary positions, grouped-query attention "
             "(4 query / 2 key-value heads), SiLU-gated MLP, untied lm_head",
    "t5": "T5ForConditionalGeneration: encoder-decoder, relative position buckets, T5 "
          "(RMS) LayerNorm, ReLU MLP, cross-attention, shared embedding tied to lm_head",
}


def build(name):
    """The wrapped model, seed 0, train() state (every dropout probability is 0)."""
    torch.manual_seed(0)
    model = BUILDERS[name]()
    model.train()
    return model


def example_inputs(name):
    """Batch 2 examples after torch.manual_seed(1): token ids in [0,256), images in [0,1).
    bert_masked: input_ids drawn as bert's (the same ids), then the last PADDED positions of
    row 1 padded (attention_mask 0, input_ids PAD_ID); token_type_ids 0 on the first half of
    each row, 1 on the rest."""
    torch.manual_seed(1)
    if name == "vit":
        return (torch.rand(BATCH, 3, IMAGE, IMAGE, dtype=torch.float32),)
    if name == "bert_masked":
        input_ids = torch.randint(0, VOCAB, (BATCH, SEQ), dtype=torch.int64)
        attention_mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
        attention_mask[1, SEQ - PADDED:] = 0
        input_ids[1, SEQ - PADDED:] = PAD_ID
        token_type_ids = torch.zeros(BATCH, SEQ, dtype=torch.int64)
        token_type_ids[:, SEQ // 2:] = 1
        return input_ids, attention_mask, token_type_ids
    return tuple(torch.randint(0, VOCAB, (BATCH, SEQ), dtype=torch.int64) for _ in INPUTS[name])


def example_labels(name, inputs):
    """Class labels in [0,10), or next-token labels of the last token input with the last
    position of each row set to -100 (two ignored positions)."""
    if LABEL_KIND[name] == "class":
        torch.manual_seed(2)
        return torch.randint(0, NUM_LABELS, (BATCH,), dtype=torch.int64)
    ids = inputs[-1]
    labels = torch.full_like(ids, -100)
    labels[:, :-1] = ids[:, 1:]
    return labels


def loss_fn(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=-100)


# --------------------------------------------------------------------------
# Stage 1: export
# --------------------------------------------------------------------------
def onnx_path(name, export):
    return os.path.join(OUT, "%s_%s.onnx" % (name, export))


def dynamic_axes(name):
    if name == "vit":
        return {"pixel_values": {0: "batch"}, "logits": {0: "batch"}}
    if name == "t5":
        return {"input_ids": {0: "batch", 1: "seq"},
                "decoder_input_ids": {0: "batch", 1: "decoder_seq"},
                "logits": {0: "batch", 1: "decoder_seq"}}
    axes = {i: {0: "batch", 1: "seq"} for i in INPUTS[name]}
    axes["logits"] = {0: "batch", 1: "seq"} if LABEL_KIND[name] == "token" else {0: "batch"}
    return axes


def diff_symbolic(g, x, n, dim, prepend, append):
    """aten::diff (n=1), which the TorchScript exporter lacks: transformers' packed-sequence
    check (masking_utils.find_packed_sequence_indices) calls it on the position ids."""
    from torch.onnx import symbolic_helper as sh
    assert sh._get_const(n, "i", "n") == 1, "only n=1"
    axis = sh._get_const(dim, "i", "dim")
    parts = [t for t in (prepend, x, append) if not sh._is_none(t)]
    x = g.op("Concat", *parts, axis_i=axis) if len(parts) > 1 else x

    def ints(*v):
        return g.op("Constant", value_t=torch.tensor(v, dtype=torch.int64))

    later = g.op("Slice", x, ints(1), ints(2 ** 62), ints(axis))
    earlier = g.op("Slice", x, ints(0), ints(-1), ints(axis))
    return g.op("Sub", later, earlier)


def cumsum_symbolic(g, x, dim, dtype):
    """aten::cumsum that casts a bool input to int64 as PyTorch does (the exporter's own
    emits CumSum on tensor(bool), which ONNX does not allow)."""
    from torch.onnx._internal.torchscript_exporter import _type_utils
    from torch.onnx import symbolic_helper as sh
    if not sh._is_none(dtype):
        to = _type_utils.JitScalarType(sh._get_const(dtype, "i", "dtype"))
    elif _type_utils.JitScalarType.from_value(x) == _type_utils.JitScalarType.BOOL:
        to = _type_utils.JitScalarType.INT64
    else:
        to = None
    if to is not None:
        x = g.op("Cast", x, to_i=to.onnx_type())
    axis = g.op("Constant", value_t=torch.tensor(sh._get_const(dim, "i", "dim")))
    return g.op("CumSum", x, axis)


def export_torchscript(name, path):
    for op, fn in (("aten::diff", diff_symbolic), ("aten::cumsum", cumsum_symbolic)):
        torch.onnx.register_custom_op_symbolic(op, fn, TORCHSCRIPT_OPSET)
    model, inputs = build(name), example_inputs(name)
    torch.onnx.export(model, inputs, path, dynamo=False, opset_version=TORCHSCRIPT_OPSET,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=INPUTS[name], output_names=["logits"],
                      dynamic_axes=dynamic_axes(name))


def strip_node_metadata(graph):
    """Clear every node's metadata_props and doc_string (the dynamo exporter puts the FX node,
    module path, class hierarchy and Python stack trace of each node there: over half of the
    file) and the doc_string of every value_info/input/output, in this graph and its subgraphs.
    Graph-level metadata_props (ExportedProgram signature) and the value_info metadata_props
    (parameter / buffer / user-input kind) are small and stay. Returns the number cleared."""
    import onnx
    cleared = 0
    for node in graph.node:
        cleared += len(node.metadata_props) + bool(node.doc_string)
        del node.metadata_props[:]
        node.ClearField("doc_string")
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                cleared += strip_node_metadata(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                cleared += sum(strip_node_metadata(g) for g in attr.graphs)
    for value in list(graph.value_info) + list(graph.input) + list(graph.output):
        cleared += bool(value.doc_string)
        value.ClearField("doc_string")
    return cleared


def export_dynamo(name, path):
    """Export, then load with external data, strip the per-node metadata and save again with
    every tensor embedded."""
    import onnx
    model, inputs = build(name), example_inputs(name)
    batch = torch.export.Dim("batch")
    shapes = {arg: {0: batch} for arg in INPUTS[name]}
    torch.onnx.export(model, inputs, path, dynamo=True, opset_version=DYNAMO_OPSET,
                      optimize=False, input_names=INPUTS[name], output_names=["logits"],
                      dynamic_shapes=shapes)
    m = onnx.load(path, load_external_data=True)
    strip_node_metadata(m.graph)
    for function in m.functions:
        for node in function.node:
            del node.metadata_props[:]
            node.ClearField("doc_string")
    onnx.save(m, path, save_as_external_data=False)
    data = path + ".data"
    if os.path.exists(data):
        os.remove(data)


def export_one(name, export):
    import onnx
    path = onnx_path(name, export)
    if os.path.exists(path):
        os.remove(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (export_torchscript if export == "torchscript" else export_dynamo)(name, path)
    m = onnx.load(path)
    assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer)
    size = os.path.getsize(path)
    assert size < MAX_FILE_BYTES, "%s is %d bytes" % (path, size)
    onnx.checker.check_model(m, full_check=True)
    return size


def stage_export(names):
    os.makedirs(OUT, exist_ok=True)
    status = load_status()
    for name in names:
        for export in EXPORTS:
            key = "%s_%s.onnx" % (name, export)
            try:
                size = export_one(name, export)
                status[key] = {"ok": True, "bytes": size}
                print("[export] %-24s %8d bytes, checker OK" % (key, size))
            except Exception as e:  # noqa: BLE001 - recorded, the next export goes on
                status[key] = {"ok": False, "error": "%s: %s" % (type(e).__name__, first_line(e))}
                print("[export] %-24s FAILED %s" % (key, status[key]["error"]))
    with open(STATUS_FILE, "w") as fh:
        json.dump(status, fh, indent=2, sort_keys=True)
        fh.write("\n")


def load_status():
    if os.path.exists(STATUS_FILE):
        with open(STATUS_FILE) as fh:
            return json.load(fh)
    return {}


def first_line(e):
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0][:400] if lines else ""


# --------------------------------------------------------------------------
# Stage 2: reference losses and gradients
# --------------------------------------------------------------------------
class KeepFloat64(torch.overrides.TorchFunctionMode):
    """Inside the float64 run, a float64 tensor is never cast down to float32.

    Hugging Face upcasts to float32 on purpose in places (Llama RMSNorm, the eager softmax
    of Llama/ViT, T5 LayerNorm's variance); for a float32 model those casts are no-ops, but
    they would make the float64 reference only float32-accurate there.  Casts of integer
    tensors (position ids, T5's relative-position buckets) are left alone, so the float64
    model computes the same function as the float32 one."""

    def __init__(self):
        super().__init__()
        self.kept = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if args and isinstance(args[0], torch.Tensor) and args[0].dtype == torch.float64:
            if func is torch.Tensor.float:
                self.kept += 1
                return args[0]
            if any(a is torch.float32 for a in list(args[1:]) + list(kwargs.values())):
                self.kept += 1
                args = tuple(torch.float64 if a is torch.float32 else a for a in args)
                kwargs = {k: torch.float64 if v is torch.float32 else v
                          for k, v in kwargs.items()}
        return func(*args, **kwargs)


def run_reference(name, dtype):
    """Loss and {parameter name: gradient} of the model in `dtype`."""
    model = build(name).to(dtype)
    inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in example_inputs(name))
    labels = example_labels(name, example_inputs(name))
    mode = KeepFloat64()
    if dtype == torch.float64:
        with mode:
            loss = loss_fn(model(*inputs), labels)
    else:
        loss = loss_fn(model(*inputs), labels)
    loss.backward()
    grads = {pname: p.grad.detach().numpy().copy()
             for pname, p in model.named_parameters() if p.requires_grad}
    return loss.item(), grads, mode.kept


def run_alternative_float32(name):
    """{parameter name: float32 gradient} computed a second way, to try the judging rule on:
    PyTorch's fused scaled-dot-product attention instead of the eager MatMul/Softmax one, and
    the batch in reverse order (so every reduction over the batch adds in another order)."""
    model = build(name)
    model.hf.set_attn_implementation("sdpa")
    order = torch.arange(BATCH - 1, -1, -1)
    inputs = example_inputs(name)
    labels = example_labels(name, inputs)[order]
    loss = loss_fn(model(*(x[order] for x in inputs)), labels)
    loss.backward()
    return {pname: p.grad.detach().numpy().copy()
            for pname, p in model.named_parameters() if p.requires_grad}


# Variants of run_adamw: the reference, a second float32 run to try the weight judging rule
# on, and two optimizer mistakes the rule must reject.
ADAMW_VARIANTS = {
    "reference": "torch.optim.AdamW, for-loop (foreach=False) implementation",
    "alternative": "fused SDPA attention, batch reversed, foreach=True AdamW",
    "no_decay": "AdamW(weight_decay=0)",
    "adam_l2": "Adam(weight_decay=%g) (L2 decay through the gradient, not decoupled)"
               % ADAMW["weight_decay"],
}


def run_adamw(name, dtype, variant="reference"):
    """ADAMW_STEPS steps of torch.optim.AdamW(**ADAMW) on the example batch, the model in
    `dtype` (float64: KeepFloat64, as run_reference). Returns (losses, {reference name:
    weights after the last step}); losses[i] is the loss after i steps (ADAMW_STEPS + 1 of
    them), float64 or float32 as the model."""
    model = build(name).to(dtype)
    inputs = example_inputs(name)
    labels = example_labels(name, inputs)
    optimizer, settings, foreach = torch.optim.AdamW, dict(ADAMW), False
    if variant == "alternative":
        model.hf.set_attn_implementation("sdpa")
        order = torch.arange(BATCH - 1, -1, -1)
        inputs, labels = tuple(x[order] for x in inputs), labels[order]
        foreach = True
    elif variant == "no_decay":
        settings["weight_decay"] = 0.0
    elif variant == "adam_l2":
        optimizer = torch.optim.Adam
    else:
        assert variant == "reference", variant
    inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)
    named = [(pname, p) for pname, p in model.named_parameters() if p.requires_grad]
    opt = optimizer([p for _, p in named], amsgrad=False, maximize=False, foreach=foreach,
                    **settings)

    def loss():
        if dtype == torch.float64:
            with KeepFloat64():
                return loss_fn(model(*inputs), labels)
        return loss_fn(model(*inputs), labels)

    losses = []
    for _ in range(ADAMW_STEPS):
        opt.zero_grad(set_to_none=True)
        value = loss()
        losses.append(value.item())
        value.backward()
        opt.step()
    losses.append(loss().item())
    weights = {reference_name(pname): p.detach().numpy().copy() for pname, p in named}
    return np.array(losses, dtype=np.float64 if dtype == torch.float64 else np.float32), weights


def adamw_arrays(name):
    """{npz member: array} of the AdamW reference of model NAME: adamw_losses64/32 and
    adamw_after64/<param>, adamw_after32/<param> of every parameter."""
    arrays = {}
    for tag, dtype in (("64", torch.float64), ("32", torch.float32)):
        losses, weights = run_adamw(name, dtype)
        arrays["adamw_losses" + tag] = losses
        for rname, value in weights.items():
            assert value.dtype == losses.dtype, (rname, value.dtype)
            arrays["adamw_after%s/%s" % (tag, rname)] = value
    return arrays


def reference_name(pname):
    """The reference name of torch parameter `pname` of the wrapper: without "hf."."""
    assert pname.startswith(PARAM_PREFIX), pname
    return pname[len(PARAM_PREFIX):]


def torch_parameters(name):
    """{wrapper parameter name ("hf.X"): float32 value} of the trainable parameters. Tied
    weights are one entry (named_parameters lists a shared Parameter once)."""
    return {pname: p.detach().numpy() for pname, p in build(name).named_parameters()
            if p.requires_grad}


def reference_path(name):
    return os.path.join(OUT, "%s_reference.npz" % name)


def float_initializers(model_proto):
    from onnx import numpy_helper
    return {t.name: numpy_helper.to_array(t) for t in model_proto.graph.initializer
            if t.data_type in (1, 11)}  # FLOAT, DOUBLE


def match_parameters(params, inits):
    """{parameter name: (initializer name, transposed)} for one ONNX file: by name when the
    name and the value agree, else by exact value (or value of the transpose) when exactly one
    unclaimed initializer has it.  Returns (matches, problems)."""
    matches, problems, claimed = {}, [], set()
    for pname, value in params.items():
        init = inits.get(pname)
        if init is not None and init.shape == value.shape and np.array_equal(init, value):
            matches[pname] = (pname, False)
            claimed.add(pname)
    for pname, value in params.items():
        if pname in matches:
            continue
        found = value_matches(value, inits, claimed)
        if len(found) == 1:
            matches[pname] = found[0]
            claimed.add(found[0][0])
        else:
            problems.append("%s: %d initializers have its value" % (pname, len(found)))
    return matches, problems


def value_matches(value, inits, claimed):
    found = []
    for iname, init in inits.items():
        if iname in claimed:
            continue
        if init.shape == value.shape and np.array_equal(init, value):
            found.append((iname, False))
        elif value.ndim == 2 and init.shape == value.T.shape and np.array_equal(init, value.T):
            found.append((iname, True))
    return found


def initializer_map(name, export):
    """{initializer name: reference parameter name} of every trainable initializer of one
    ONNX file (None when the file is missing). Raises when a parameter has no initializer or
    only a transposed one (a test then could not take the gradient as it is)."""
    import onnx
    path = onnx_path(name, export)
    if not os.path.exists(path):
        return None
    params = torch_parameters(name)
    inits = float_initializers(onnx.load(path))
    matches, problems = match_parameters(params, inits)
    problems += ["%s is initializer %s transposed" % (p, i)
                 for p, (i, t) in sorted(matches.items()) if t]
    if problems:
        raise RuntimeError("%s: %s" % (os.path.basename(path), "; ".join(problems)))
    mapping = {iname: reference_name(pname) for pname, (iname, _) in matches.items()}
    renamed = sorted("%s is %s" % (p, i) for p, (i, _) in matches.items() if p != i)
    others = sorted(set(inits) - set(mapping))
    print("[reference] %-24s %d trainable initializers%s; float initializers that are no "
          "parameter: %s" % (os.path.basename(path), len(mapping),
                             " (" + "; ".join(renamed) + ")" if renamed else "",
                             ", ".join(others) or "none"))
    return dict(sorted(mapping.items()))


def save_npz(path, arrays):
    """np.savez_compressed, but with a fixed timestamp on every member, so that the same
    arrays always give the same bytes (a regenerated file shows no change in git)."""
    import io
    import zipfile
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key, value in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asanyarray(value), allow_pickle=False)
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue())


def load_initializers_file():
    if os.path.exists(INITIALIZERS_FILE):
        with open(INITIALIZERS_FILE) as fh:
            return json.load(fh)
    return {}


def stage_reference(names):
    table = load_initializers_file()
    for name in names:
        loss64, grad64, kept = run_reference(name, torch.float64)
        loss32, grad32, _ = run_reference(name, torch.float32)
        worst = max(float(np.abs(grad32[p] - grad64[p]).max()) for p in grad64)
        inputs = example_inputs(name)
        arrays = {iname: x.numpy() for iname, x in zip(INPUTS[name], inputs)}
        arrays["labels"] = example_labels(name, inputs).numpy()
        arrays["loss64"] = np.array(loss64, dtype=np.float64)
        arrays["loss32"] = np.array(loss32, dtype=np.float32)
        for tag, grads, dtype in (("64", grad64, np.float64), ("32", grad32, np.float32)):
            for pname, grad in grads.items():
                assert grad.dtype == dtype, (pname, grad.dtype)
                arrays["grad%s/%s" % (tag, reference_name(pname))] = grad
        path = reference_path(name)
        adamw = adamw_arrays(name) if name in ADAMW_MODELS else {}
        save_npz(path, dict(arrays, **adamw))
        big = {m for m in adamw if m.startswith("adamw_after") and
               adamw[m].size > ADAMW_SMALL_PARAM}
        if os.path.getsize(path) > ADAMW_MAX_NPZ_BYTES and big:
            print("[reference] %-24s %8d bytes > %d: adamw_after64/32 of the %d parameters "
                  "of > %d values left out" % (os.path.basename(path), os.path.getsize(path),
                                              ADAMW_MAX_NPZ_BYTES, len(big) // 2,
                                              ADAMW_SMALL_PARAM))
            save_npz(path, dict(arrays, **{m: v for m, v in adamw.items() if m not in big}))
        if adamw and os.path.getsize(path) > ADAMW_MAX_NPZ_BYTES:
            print("[reference] %-24s WARNING: %d bytes, over %d" % (
                os.path.basename(path), os.path.getsize(path), ADAMW_MAX_NPZ_BYTES))
        print("[reference] %-24s %8d bytes: loss64 %.12f loss32 %.7f, %d parameters, "
              "max|grad32-grad64| %.2e (float32 casts kept float64: %d)"
              % (os.path.basename(path), os.path.getsize(path), loss64, loss32, len(grad64),
                 worst, kept))
        if adamw:
            print("[reference] %-24s AdamW %d steps: loss64 %.12f -> %.12f, max|losses32 - "
                  "losses64| %.2e" % (os.path.basename(path), ADAMW_STEPS,
                                      adamw["adamw_losses64"][0], adamw["adamw_losses64"][-1],
                                      np.abs(adamw["adamw_losses32"] -
                                             adamw["adamw_losses64"]).max()))
        for export in EXPORTS:
            old = os.path.join(OUT, "%s_%s_reference.npz" % (name, export))  # earlier layout
            if os.path.exists(old):
                os.remove(old)
            key = "%s_%s.onnx" % (name, export)
            mapping = initializer_map(name, export)
            if mapping is None:
                print("[reference] %-24s missing, left out of %s"
                      % (key, os.path.basename(INITIALIZERS_FILE)))
                table.pop(key, None)
            else:
                table[key] = mapping
    ordered = {"%s_%s.onnx" % (n, e): table["%s_%s.onnx" % (n, e)]
               for n in MODEL_NAMES for e in EXPORTS if "%s_%s.onnx" % (n, e) in table}
    with open(INITIALIZERS_FILE, "w") as fh:
        json.dump(ordered, fh, indent=1)
        fh.write("\n")
    print("[reference] wrote %s" % INITIALIZERS_FILE)


# --------------------------------------------------------------------------
# Stage 3: report -> README.md
# --------------------------------------------------------------------------
def op_histogram(model_proto):
    hist = collections.Counter()
    for node in model_proto.graph.node:
        hist[node.op_type if node.domain in ("", "ai.onnx") else
             "%s:%s" % (node.domain, node.op_type)] += 1
    return hist


def check_onnxruntime(name, path):
    """Run the file in onnxruntime on the inputs stored in NAME_reference.npz: max |logits -
    torch float32 logits| (OK when <= ATOL) and |cross-entropy of those logits - loss32|.
    Returns (ok, text)."""
    import onnxruntime as ort
    if not os.path.exists(reference_path(name)):
        return False, "not run: no %s" % os.path.basename(reference_path(name))
    ref = np.load(reference_path(name))
    feeds = {i: ref[i] for i in INPUTS[name]}
    try:
        options = ort.SessionOptions()
        options.log_severity_level = 3
        sess = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        got = sess.run(["logits"], feeds)[0]
    except Exception as e:  # noqa: BLE001 - recorded in the report
        return False, "FAILED: %s: %s" % (type(e).__name__, first_line(e))
    with torch.no_grad():
        want = build(name)(*(torch.from_numpy(feeds[i]) for i in INPUTS[name])).numpy()
    if got.shape != want.shape:
        return False, "FAILED: shape %s, torch %s" % (list(got.shape), list(want.shape))
    diff = float(np.abs(got - want).max())
    loss = loss_fn(torch.from_numpy(got), torch.from_numpy(ref["labels"])).item()
    return diff <= ATOL, "%s (max abs diff %.2e; loss of these logits - loss32 = %.1e)" % (
        "OK" if diff <= ATOL else "MISMATCH", diff, loss - float(ref["loss32"]))


def check_masking(name, path):
    """For a model with an attention_mask input, in onnxruntime on the inputs stored in
    NAME_reference.npz: max|logits change| of the padded row (row 1) and of row 0 when (a) its
    input_ids at the masked positions become row 0's ids there (must stay <= MASK_ATOL),
    (b) the same, both times with an all-ones attention_mask, and (c) its token_type_ids flip
    (0 <-> 1) (both must exceed MASK_MOVES). Returns (ok, text), or (True, None) for a model
    without a mask."""
    import onnxruntime as ort
    if "attention_mask" not in INPUTS[name]:
        return True, None
    if not os.path.exists(reference_path(name)):
        return False, "not run: no %s" % os.path.basename(reference_path(name))
    ref = np.load(reference_path(name))
    feeds = {i: ref[i] for i in INPUTS[name]}
    masked = np.flatnonzero(feeds["attention_mask"][1] == 0)
    if masked.size == 0:
        return False, "FAILED: row 1 of attention_mask masks nothing"
    try:
        options = ort.SessionOptions()
        options.log_severity_level = 3
        sess = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        unmasked = dict(feeds, attention_mask=np.ones_like(feeds["attention_mask"]))
        new_ids = feeds["input_ids"].copy()
        new_ids[1, masked] = feeds["input_ids"][0, masked]
        flipped = feeds["token_type_ids"].copy()
        flipped[1] = 1 - flipped[1]
        moves = []
        for before, after in ((feeds, dict(feeds, input_ids=new_ids)),
                              (unmasked, dict(unmasked, input_ids=new_ids)),
                              (feeds, dict(feeds, token_type_ids=flipped))):
            base, got = (sess.run(["logits"], f)[0] for f in (before, after))
            moves.append((float(np.abs(got[1] - base[1]).max()),
                          float(np.abs(got[0] - base[0]).max())))
    except Exception as e:  # noqa: BLE001 - recorded in the report
        return False, "FAILED: %s: %s" % (type(e).__name__, first_line(e))
    ok = moves[0][0] <= MASK_ATOL and moves[1][0] > MASK_MOVES and moves[2][0] > MASK_MOVES
    return ok, ("%s: max|logits change| of the padded row 1 (of row 0 in brackets) when its "
                "input_ids at its %d masked positions change (to row 0's ids there): %.1e "
                "(%.1e), must be <= %g; the same change with an all-ones attention_mask: %.2e "
                "(%.1e), must be > %g; its token_type_ids flipped (0 <-> 1): %.2e (%.1e), must "
                "be > %g" % ("OK" if ok else "FAILED", masked.size, moves[0][0], moves[0][1],
                             MASK_ATOL, moves[1][0], moves[1][1], MASK_MOVES, moves[2][0],
                             moves[2][1], MASK_MOVES))


def check_initializers(name, key, model_proto, mapping):
    """Check one file's entry of initializers.json against the file, the torch model and
    NAME_reference.npz. Returns (problems, text)."""
    if mapping is None:
        return ["%s: not in %s" % (key, os.path.basename(INITIALIZERS_FILE))], "not listed"
    params = torch_parameters(name)
    inits = float_initializers(model_proto)
    ref = np.load(reference_path(name)) if os.path.exists(reference_path(name)) else None
    problems = [] if ref is not None else ["no %s" % os.path.basename(reference_path(name))]
    targets = collections.Counter(mapping.values())
    for iname, rname in mapping.items():
        init, value = inits.get(iname), params.get(PARAM_PREFIX + rname)
        if init is None or value is None:
            problems.append("%s -> %s: %s" % (iname, rname, "no such float initializer"
                                              if init is None else "no such parameter"))
            continue
        if init.dtype != value.dtype or init.shape != value.shape or not np.array_equal(init,
                                                                                        value):
            problems.append("%s differs from parameter %s" % (iname, rname))
        if ref is None:
            continue
        for tag, dtype in (("64", np.float64), ("32", np.float32)):
            member = "grad%s/%s" % (tag, rname)
            if member not in ref.files:
                problems.append("no %s in the npz" % member)
            elif ref[member].dtype != dtype or ref[member].shape != init.shape:
                problems.append("%s is %s %s, initializer %s" % (
                    member, ref[member].dtype, ref[member].shape, init.shape))
    for pname in params:
        if targets[reference_name(pname)] != 1:
            problems.append("parameter %s is %d listed initializers"
                            % (reference_name(pname), targets[reference_name(pname)]))
    if ref is not None:
        stored = {f[len("grad64/"):] for f in ref.files if f.startswith("grad64/")}
        if stored != {reference_name(p) for p in params}:
            problems.append("the npz's grad64/ members are not the parameters")
    others = sorted(set(inits) - set(mapping))
    for iname in others:  # a second copy of a tied weight would have a parameter's value
        if any(inits[iname].shape == v.shape and np.array_equal(inits[iname], v)
               for v in params.values()):
            problems.append("unlisted %s has a parameter's value" % iname)
    renamed = ["`%s` -> `%s`" % (i, r) for i, r in sorted(mapping.items())
               if i != PARAM_PREFIX + r]
    text = ("%d listed, %s; each equals its torch parameter exactly; float initializers not "
            "listed (no parameter): %s" % (
                len(mapping), "each `%s<param>`%s" % (PARAM_PREFIX, " except " + ", ".join(
                    renamed) if renamed else ""),
                ", ".join("`%s`" % o for o in others) or "none"))
    return ["%s: %s" % (key, p) for p in problems], text


def judge_check(name):
    """Try the judging rule of README.md on a second float32 gradient (run_alternative_float32).
    Returns (problems, text)."""
    if not os.path.exists(reference_path(name)):
        return ["no %s" % os.path.basename(reference_path(name))], "not run"
    ref = np.load(reference_path(name))
    alt = run_alternative_float32(name)
    worst_rule, worst_ratio, naive = (0.0, ""), (0.0, ""), (0.0, "")
    model_scale = max(float(np.abs(ref[f]).max()) for f in ref.files if f.startswith("grad64/"))
    for pname, g in alt.items():
        rname = reference_name(pname)
        g64, g32 = ref["grad64/" + rname], ref["grad32/" + rname].astype(np.float64)
        err, err32 = np.abs(g - g64), np.abs(g32 - g64)
        bound = (JUDGE_FACTOR * err32.max() + JUDGE_FLOOR * np.abs(g64).max() +
                 JUDGE_MODEL_FLOOR * model_scale)
        worst_rule = max(worst_rule, (float(err.max() / bound), rname))
        worst_ratio = max(worst_ratio, (float(err.max() / err32.max()), rname))
        bad = np.mean(err > np.maximum(JUDGE_FACTOR * err32, 1e-4 * np.abs(g64)))
        naive = max(naive, (float(bad), rname))
    problems = ([] if worst_rule[0] <= 1 else
                ["%s: a second float32 gradient fails the judging rule (%s)"
                 % (name, worst_rule[1])])
    text = ("max|g - grad64| / bound at most %.2f (`%s`); max|g - grad64| / max|grad32 - "
            "grad64| at most %.2f (`%s`); the elementwise rule |g - grad64| <= "
            "max(10|grad32 - grad64|, 1e-4|grad64|) would reject up to %.1f%% of a tensor (`%s`)"
            % (worst_rule[0], worst_rule[1], worst_ratio[0], worst_ratio[1], 100 * naive[0],
               naive[1]))
    return problems, text


def adamw_floors(ref):
    """{param: the absolute floor of the AdamW weight rule}: ADAMW_STEP_FLOOR * steps * lr,
    plus steps * lr * JUDGE_MODEL_FLOOR * G / eps for a tensor with a roundoff-only gradient
    element (0 < |grad64| <= ROUNDOFF_ZERO * G), and the set of those tensors."""
    grads = [f[len("grad64/"):] for f in ref.files if f.startswith("grad64/")]
    model_scale = max(float(np.abs(ref["grad64/" + g]).max()) for g in grads)
    total = ADAMW_STEPS * ADAMW["lr"]
    floors, roundoff = {}, set()
    for g in grads:
        g64 = np.abs(ref["grad64/" + g])
        floors[g] = ADAMW_STEP_FLOOR * total
        if ((g64 > 0) & (g64 <= ROUNDOFF_ZERO * model_scale)).any():
            roundoff.add(g)
            floors[g] += total * JUDGE_MODEL_FLOOR * model_scale / ADAMW["eps"]
    return floors, roundoff


def adamw_judge(ref, losses, weights):
    """The AdamW judging rule of README.md on a float32 run (losses, {param: weights}).
    Returns (|loss - losses64| / bound per step, {param: (max|w - w64| / bound, the same
    without ADAMW_STEP_FLOOR's term, max|w - w64| / max|w32 - w64|)}) over the stored
    adamw_after64 members."""
    l64, l32 = ref["adamw_losses64"], ref["adamw_losses32"].astype(np.float64)
    loss_ratio = (np.abs(losses.astype(np.float64) - l64) /
                  (JUDGE_FACTOR * np.abs(l32 - l64) + JUDGE_FLOOR * np.abs(l64)))
    floors, _ = adamw_floors(ref)
    step_floor = ADAMW_STEP_FLOOR * ADAMW_STEPS * ADAMW["lr"]
    ratios = {}
    for member in ref.files:
        if not member.startswith("adamw_after64/"):
            continue
        rname = member[len("adamw_after64/"):]
        w64 = ref[member]
        err = float(np.abs(weights[rname].astype(np.float64) - w64).max())
        err32 = float(np.abs(ref["adamw_after32/" + rname].astype(np.float64) - w64).max())
        base = JUDGE_FACTOR * err32 + JUDGE_FLOOR * float(np.abs(w64).max())
        ratios[rname] = (err / (base + floors[rname]), err / (base + floors[rname] - step_floor),
                         err / err32 if err32 > 0 else float("inf") if err > 0 else 0.0)
    return loss_ratio, ratios


def adamw_report(name, ref):
    """Checks of the adamw_* members of NAME_reference.npz and the AdamW judging rule on a
    second float32 run and on two optimizer mistakes. Returns (problems, lines)."""
    members = [f for f in ref.files if f.startswith("adamw_")]
    if name not in ADAMW_MODELS:
        return (["%s: unexpected adamw_* members" % name] if members else []), []
    problems = []
    params = {reference_name(p): v for p, v in torch_parameters(name).items()}
    steps = ADAMW_STEPS + 1
    for tag, dtype in (("64", np.float64), ("32", np.float32)):
        member = "adamw_losses" + tag
        if member not in ref.files:
            return ["%s: no %s in the npz" % (name, member)], []
        if ref[member].dtype != dtype or ref[member].shape != (steps,):
            problems.append("%s: %s is %s %s" % (name, member, ref[member].dtype,
                                                 ref[member].shape))
        elif ref[member][0] != ref["loss" + tag]:
            problems.append("%s: %s[0] != loss%s" % (name, member, tag))
    stored = {t: sorted(f[len("adamw_after%s/" % t):] for f in members
                        if f.startswith("adamw_after%s/" % t)) for t in ("64", "32")}
    small = sorted(p for p, v in params.items() if v.size <= ADAMW_SMALL_PARAM)
    if stored["64"] != stored["32"] or stored["64"] not in (sorted(params), small):
        return problems + ["%s: adamw_after64/32 hold neither every parameter nor those of "
                           "<= %d values" % (name, ADAMW_SMALL_PARAM)], []
    for rname in stored["64"]:
        for tag, dtype in (("64", np.float64), ("32", np.float32)):
            value = ref["adamw_after%s/%s" % (tag, rname)]
            if value.dtype != dtype or value.shape != params[rname].shape:
                problems.append("%s: adamw_after%s/%s is %s %s, parameter %s" % (
                    name, tag, rname, value.dtype, value.shape, params[rname].shape))
    if problems:
        return problems, []
    l64, l32 = ref["adamw_losses64"], ref["adamw_losses32"].astype(np.float64)
    moved = max(float(np.abs(ref["adamw_after64/" + p] - params[p]).max()) for p in stored["64"])
    err32 = {p: float(np.abs(ref["adamw_after32/" + p].astype(np.float64) -
                             ref["adamw_after64/" + p]).max()) for p in stored["64"]}
    worst32 = max((v, p) for p, v in err32.items())
    floors, roundoff = adamw_floors(ref)
    which = ("every parameter (%d)" % len(params) if stored["64"] == sorted(params) else
             "the %d of the %d parameters with <= %d values; left out: %s" % (
                 len(small), len(params), ADAMW_SMALL_PARAM,
                 ", ".join("`%s`" % p for p in sorted(set(params) - set(small)))))
    extra = ADAMW_STEPS * ADAMW["lr"] * JUDGE_MODEL_FLOOR * float(max(
        np.abs(ref[f]).max() for f in ref.files if f.startswith("grad64/"))) / ADAMW["eps"]
    lines = [
        "- AdamW, %d steps: `adamw_losses64` %.6f -> %.6f (`adamw_losses64[0]` = `loss64`), "
        "max|adamw_losses32 - adamw_losses64| %.1e; `adamw_after64/<param>`, "
        "`adamw_after32/<param>` for %s, %d values; max|w64 - w_init| %.2e; "
        "max|w32 - w64| %.1e (`%s`); roundoff-gradient tensors: %s"
        % (ADAMW_STEPS, l64[0], l64[-1], float(np.abs(l32 - l64).max()), which,
           sum(params[p].size for p in stored["64"]), moved, worst32[0], worst32[1],
           "%s (extra floor %.1e)" % (", ".join("`%s`" % p for p in sorted(roundoff)), extra)
           if roundoff else "none")]
    loss_ratio, ratios = adamw_judge(ref, *run_adamw(name, torch.float32, "alternative"))
    worst = [max((r[i], p) for p, r in ratios.items()) for i in range(3)]
    if loss_ratio.max() > 1 or worst[0][0] > 1:
        problems.append("%s: a second float32 AdamW run fails the AdamW judging rule (%s)"
                        % (name, "losses" if loss_ratio.max() > 1 else worst[0][1]))
    lines.append(
        "- AdamW rule on a second float32 run (%s): losses |loss - losses64| / bound at most "
        "%.2f (`[%d]`); weights max|w - w64| / bound at most %.2f (`%s`), without the "
        "`%g * steps * lr` term at most %.2f (`%s`); max|w - w64| / max|w32 - w64| at most "
        "%.1f (`%s`)" % (ADAMW_VARIANTS["alternative"], loss_ratio.max(),
                         int(loss_ratio.argmax()), worst[0][0], worst[0][1], ADAMW_STEP_FLOOR,
                         worst[1][0], worst[1][1], worst[2][0], worst[2][1]))
    caught = []
    for variant in ("no_decay", "adam_l2"):
        loss_ratio, ratios = adamw_judge(ref, *run_adamw(name, torch.float32, variant))
        failing = sum(r[0] > 1 for r in ratios.values())
        if failing == 0 and loss_ratio.max() <= 1:
            problems.append("%s: the AdamW judging rule accepts %s" % (
                name, ADAMW_VARIANTS[variant]))
        caught.append("%s: %d of %d tensors (max|w - w64| / bound up to %.3g), losses up to "
                      "%.3g x bound" % (ADAMW_VARIANTS[variant], failing, len(ratios),
                                        max(r[0] for r in ratios.values()), loss_ratio.max()))
    lines.append("- the AdamW rule rejects " + "; ".join(caught))
    return problems, lines


def reference_report(name):
    """Lines about NAME_reference.npz and the judging-rule check. Returns (problems, lines)."""
    path = reference_path(name)
    if not os.path.exists(path):
        return ["no %s" % os.path.basename(path)], ["### `%s`" % os.path.basename(path), "",
                                                     "Missing.", ""]
    ref = np.load(path)
    grads = [f[len("grad64/"):] for f in ref.files if f.startswith("grad64/")]
    scale = {g: float(np.abs(ref["grad64/" + g]).max()) for g in grads}
    # Exactly 0 in exact arithmetic (the attention key biases: softmax ignores a constant
    # added to every score of a row), so grad64 there is roundoff far below the others.
    zero = sorted(g for g in grads if scale[g] <= 1e-12 * max(scale.values()))
    rel = max(float(np.abs(ref["grad32/" + g] - ref["grad64/" + g]).max()) / scale[g]
              for g in grads if g not in zero)
    model_scale = max(scale.values())
    smallest = min((scale[g], g) for g in grads if g not in zero)
    zero_note = ("; G = max|grad64| over the model = %.3g, the smallest max|grad64| of a "
                 "tensor is %.1e G (`%s`)" % (model_scale, smallest[0] / model_scale,
                                              smallest[1]))
    zero_note += ("; exact gradient 0, grad64 only roundoff (max|grad64| <= %.0e, max|grad32| "
                 "%.0e): %s" % (max(scale[g] for g in zero),
                                max(float(np.abs(ref["grad32/" + g]).max()) for g in zero),
                                ", ".join("`%s`" % g for g in zero)) if zero else "")
    problems, judged = judge_check(name)
    adamw_problems, adamw_lines = adamw_report(name, ref)
    problems += adamw_problems
    return problems, [
        "### `%s`" % os.path.basename(path), "",
        "- %d bytes; inputs %s; `labels` %s; `loss64` %.15g; `loss32` %.9g (loss32 - loss64 "
        "= %.1e)" % (os.path.getsize(path), ", ".join(
            "`%s` %s %s" % (i, ref[i].dtype, tuple(ref[i].shape)) for i in INPUTS[name]),
            tuple(ref["labels"].shape), float(ref["loss64"]), float(ref["loss32"]),
            float(ref["loss32"]) - float(ref["loss64"])),
        "- %d parameters (%d values): `grad64/<param>` float64, `grad32/<param>` float32; "
        "max|grad32 - grad64| / max|grad64| at most %.1e%s"
        % (len(grads), sum(ref["grad64/" + g].size for g in grads), rel, zero_note),
        "- judging rule on a second float32 run (fused SDPA attention, batch reversed): %s"
        % judged] + adamw_lines + [""]


def onnxtrain_inspect(path):
    """(exit code, first error line or '', the 'cannot train yet' line or '')."""
    if not os.path.exists(ONNXTRAIN):
        return None, "no %s" % os.path.relpath(ONNXTRAIN, REPO), ""
    proc = subprocess.run([ONNXTRAIN, "inspect", os.path.relpath(path, REPO)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    out_lines = proc.stdout.splitlines() + proc.stderr.splitlines()
    cannot = next((ln.strip() for ln in proc.stdout.splitlines() if "cannot train yet" in ln), "")
    error = ""
    if proc.returncode != 0:
        err_lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        flagged = [ln for ln in out_lines if "error" in ln.lower()]
        error = (flagged or err_lines or [""])[0]
    return proc.returncode, error, cannot


def node_metadata_count(model_proto):
    return sum(len(n.metadata_props) + bool(n.doc_string) for n in model_proto.graph.node)


def file_report(name, export, status, table):
    import onnx
    key = "%s_%s.onnx" % (name, export)
    path = onnx_path(name, export)
    if not os.path.exists(path):
        err = status.get(key, {}).get("error", "not exported")
        return {"file": key, "missing": True, "error": err, "problems": ["%s: %s" % (key, err)]}
    m = onnx.load(path)
    problems = []
    try:
        onnx.checker.check_model(m, full_check=True)
        checker = "OK"
    except Exception as e:  # noqa: BLE001 - recorded in the report
        checker = "FAILED: %s" % first_line(e)
        problems.append("%s: onnx.checker %s" % (key, checker))
    opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    rc, error, cannot = onnxtrain_inspect(path)
    ort_ok, ort = check_onnxruntime(name, path)
    if not ort_ok:
        problems.append("%s: onnxruntime %s" % (key, ort))
    mask_ok, masking = check_masking(name, path)
    if not mask_ok:
        problems.append("%s: masking %s" % (key, masking))
    init_problems, init_text = check_initializers(name, key, m, table.get(key))
    problems += init_problems
    metadata = node_metadata_count(m)
    if export == "dynamo" and metadata:
        problems.append("%s: %d node metadata_props/doc_strings" % (key, metadata))
    return {"file": key, "missing": False, "bytes": os.path.getsize(path), "opset": opset,
            "ir": m.ir_version, "nodes": len(m.graph.node), "metadata": metadata,
            "initializers": len(m.graph.initializer), "ops": op_histogram(m),
            "checker": checker, "ort": ort, "masking": masking, "inspect_rc": rc,
            "inspect_error": error, "inspect_cannot": cannot, "init_text": init_text,
            "problems": problems}


def format_file(rep):
    if rep["missing"]:
        return ["### `%s`" % rep["file"], "", "Export failed: `%s`" % rep["error"], ""]
    ops = ", ".join("%s: %d" % kv for kv in sorted(rep["ops"].items()))
    inspect = "exit %s" % rep["inspect_rc"]
    if rep["inspect_error"]:
        inspect += ", first error: `%s`" % rep["inspect_error"]
    if rep["inspect_cannot"]:
        inspect += "; `%s`" % rep["inspect_cannot"]
    lines = ["### `%s`" % rep["file"], "",
             "- %d bytes, opset %d, IR %d, %d nodes, %d initializers, %d node metadata_props/"
             "doc_strings; onnx.checker (full_check): %s"
             % (rep["bytes"], rep["opset"], rep["ir"], rep["nodes"], rep["initializers"],
                rep["metadata"], rep["checker"]),
             "- trainable initializers (`initializers.json`): %s" % rep["init_text"],
             "- onnxruntime vs PyTorch float32 logits, reference inputs (atol %g): %s"
             % (ATOL, rep["ort"]),
             "- `onnxtrain inspect`: %s" % inspect,
             "- ops (%d types): %s" % (len(rep["ops"]), ops)]
    if rep["masking"] is not None:
        lines.insert(5, "- masking, onnxruntime on the reference inputs: %s" % rep["masking"])
    lines += ["- PROBLEM: %s" % p for p in rep["problems"]]
    return lines + [""]


def versions():
    import onnx
    import onnxruntime
    import onnxscript
    import transformers
    return ("torch %s, transformers %s, onnx %s, onnxscript %s, onnxruntime %s, numpy %s, "
            "Python %s" % (torch.__version__, transformers.__version__, onnx.__version__,
                           onnxscript.__version__, onnxruntime.__version__, np.__version__,
                           sys.version.split()[0]))


def model_table():
    rows = ["| name | inputs | logits | trainable params | network |", "|---|---|---|---|---|"]
    for name in MODEL_NAMES:
        model = build(name)
        params = sum(p.numel() for p in model.parameters() if p.requires_grad)
        ins = ", ".join("`%s` %s" % (i, "float32 (batch,3,32,32)" if i == "pixel_values"
                                     else "int64 (batch,seq)") for i in INPUTS[name])
        out = "(batch,seq,256)" if LABEL_KIND[name] == "token" else "(batch,10)"
        rows.append("| `%s` | %s | %s | %d | %s |" % (name, ins, out, params, DESCRIPTION[name]))
    return rows


def file_sizes():
    rows = ["| file | bytes |", "|---|---|"]
    names = sorted(f for f in os.listdir(OUT) if f != "README.md")
    rows += ["| `%s` | %d |" % (f, os.path.getsize(os.path.join(OUT, f))) for f in names]
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in names)
    return rows + ["| all but README.md | %d |" % total]


def stage_report(names):
    status, table = load_status(), load_initializers_file()
    problems, lines = [], ["## Files (generated by the report stage)", "",
                           "Versions: %s." % versions(), ""] + file_sizes() + [""]
    all_ops = set()
    for name in names:
        ref_problems, ref_lines = reference_report(name)
        problems += ref_problems
        lines += ref_lines
        for export in EXPORTS:
            rep = file_report(name, export, status, table)
            problems += rep["problems"]
            lines += format_file(rep)
            all_ops |= set(rep.get("ops", {}))
    lines += ["All op types across these files (%d): %s" % (len(all_ops),
                                                            ", ".join(sorted(all_ops))), ""]
    print("\n".join(lines))
    if names == MODEL_NAMES:
        with open(os.path.join(OUT, "README.md"), "w") as fh:
            fh.write("\n".join(readme_intro() + lines))
        print("wrote %s" % os.path.join(OUT, "README.md"))
    if problems:
        print("PROBLEMS:\n  " + "\n  ".join(problems))
        sys.exit(1)
    print("report: every check passed")


def readme_intro():
    return [
        "# models/transformers/ — tiny Hugging Face transformers in ONNX",
        "",
        "Generated by `models/make_transformers.py`; do not edit these files by hand (this",
        "README included): change the script and run it again:",
        "",
        "```sh",
        "/work/venv/torchnew/bin/python models/make_transformers.py            # export, reference, report",
        "/work/venv/torchnew/bin/python models/make_transformers.py --stage report",
        "```",
        "",
        "The venv: `python3 -m venv /work/venv/torchnew` (Python 3.11), then `pip install torch "
        "onnx onnxscript onnxruntime transformers numpy safetensors`.",
        "",
        "## Models",
        "",
        "Every model: 2 layers, hidden 64, 4 attention heads, intermediate 128, vocab 256 "
        "(byte-level text), 64 positions, every dropout probability 0, `attn_implementation="
        "\"%s\"`, built right after `torch.manual_seed(0)` and wrapped so that forward takes the "
        "graph inputs and returns only `logits`; exported in `train()` state." % ATTN,
        "",
    ] + model_table() + [
        "",
        "## Files",
        "",
        "| file | what |",
        "|---|---|",
        "| `NAME_torchscript.onnx` | `torch.onnx.export(dynamo=False, opset_version=%d, training="
        "TrainingMode.TRAINING, do_constant_folding=False)`, dynamic axes `batch` (and `seq`, "
        "`decoder_seq` for token models) |" % TORCHSCRIPT_OPSET,
        "| `NAME_dynamo.onnx` | `torch.onnx.export(dynamo=True, opset_version=%d, optimize=False)`, "
        "`dynamic_shapes` = `Dim(\"batch\")`, loaded with its external data and saved with every "
        "tensor embedded, after clearing every node's `metadata_props` and `doc_string` and every "
        "value_info/input/output `doc_string` (the exporter's FX node, module path, class "
        "hierarchy and stack trace per node: over half the file); nothing else changed (the "
        "graph-level `metadata_props` and the value_info `metadata_props` stay) |" % DYNAMO_OPSET,
        "| `NAME_reference.npz` | the PyTorch reference of model NAME, shared by both exports, "
        "keyed by PyTorch parameter names (below); written deflated (`np.savez_compressed`'s "
        "format, fixed member timestamps so that a rerun gives the same bytes) |",
        "| `initializers.json` | for every ONNX file, its trainable initializers and the parameter "
        "each one holds (below) |",
        "| `export_status.json` | the result (or error) of every export |",
        "",
        "The TorchScript exporter needs two custom symbolics (in the script), both for "
        "transformers' packed-sequence check (`masking_utils.find_packed_sequence_indices`, run "
        "when no attention mask is given, i.e. gpt2 and llama here): `aten::diff`, which the "
        "exporter lacks, and `aten::cumsum`, whose built-in symbolic emits `CumSum` on "
        "`tensor(bool)` (invalid ONNX; PyTorch sums bools as int64).",
        "",
        "### `NAME_reference.npz` members",
        "",
        "A zip of `.npy` members (deflated); the member `KEY.npy` is the array `KEY`:",
        "",
        "- the example inputs under the graph input names (`input_ids`, and `decoder_input_ids` for "
        "t5: int64 (2,16) in [0,256); `pixel_values` for vit: float32 (2,3,32,32) uniform [0,1)); "
        "drawn after `torch.manual_seed(1)`; bert_masked: `input_ids` drawn as bert's (the "
        "same values), then row 1 padded: its last %d positions get `attention_mask` 0 (1 "
        "elsewhere) and `input_ids` %d (BERT's `pad_token_id`, so row 0 is bert's row 0 and row "
        "1 differs from bert's only there); `token_type_ids` 0 on positions 0-%d of each row, 1 "
        "on %d-%d; all three int64 (2,16);" % (PADDED, PAD_ID, SEQ // 2 - 1, SEQ // 2, SEQ - 1),
        "- `labels` int64: `(batch,)` in [0,10) for bert/bert_masked/vit (drawn after "
        "`torch.manual_seed(2)`); for gpt2/llama/t5 `(batch,seq)` "
        "next-token labels (`labels[:, t] = ids[:, t+1]`, of `decoder_input_ids` for t5) with "
        "the last position of each row = -100 (two ignored positions);",
        "- `loss64` float64 and `loss32` float32, both 0-d (shape `()`): `F.cross_entropy(logits."
        "reshape(-1, C), labels.reshape(-1), ignore_index=-100)` (mean over the labels that are "
        "not -100), the model in float64 (`model.double()`) and float32. In the float64 run a "
        "float64 tensor is never cast down to float32 (HF upcasts to float32 in Llama's RMSNorm "
        "and softmax, ViT's softmax, T5's LayerNorm), so the float64 reference is float64 "
        "throughout;",
        "- `grad64/<param>` float64 and `grad32/<param>` float32: the gradient of that loss for "
        "every trainable parameter `<param>`, its PyTorch name in the Hugging Face model (the "
        "wrapper's `%s` prefix dropped: `transformer.wte.weight`, `bert.embeddings.word_embeddings"
        ".weight`, ...), in the parameter's shape. A tied weight (GPT-2's lm_head = wte, T5's "
        "shared = encoder/decoder embed_tokens = lm_head) is one parameter, under the name "
        "`named_parameters()` gives it (`transformer.wte.weight`, `shared.weight`), and its "
        "gradient is the sum over every use." % PARAM_PREFIX,
        "- %s only: `adamw_losses64`, `adamw_losses32`, "
        "`adamw_after64/<param>`, `adamw_after32/<param>`: %d steps of AdamW on this batch "
        "(below)." % (", ".join(ADAMW_MODELS), ADAMW_STEPS),
        "",
        "bert_masked's word embedding has `padding_idx` %d (BERT's default), so PyTorch never "
        "gives its row %d a gradient (`grad64`/`grad32` there are 0). The only ids %d of the "
        "example are the padded positions, and the gradient reaching those is exactly 0 anyway "
        "(their keys and values get softmax weight exactly 0, and nothing else carries them to "
        "the [CLS] position the pooler reads), so a plain Gather gradient (the ONNX graphs know "
        "no `padding_idx`) gives the same row. The report stage checks in onnxruntime that the "
        "mask works (each bert_masked file's lines below)." % (PAD_ID, PAD_ID, PAD_ID),
        "",
        "### `initializers.json`",
        "",
        "`{\"NAME_EXPORT.onnx\": {\"<initializer name>\": \"<param>\", ...}, ...}`, one entry per "
        "ONNX file (all %d), e.g. `\"gpt2_dynamo.onnx\": {\"hf.lm_head.weight\": "
        "\"transformer.wte.weight\", \"hf.transformer.h.0.attn.c_attn.bias\": "
        "\"transformer.h.0.attn.c_attn.bias\", ...}`. It lists exactly the trainable "
        "initializers: every PyTorch parameter is the value of exactly one listed initializer of "
        "each file (a tied weight is one initializer, used by both the embedding Gather and the "
        "output projection). A float initializer that is not listed is a constant, not trained "
        "(llama_dynamo.onnx's rotary `inv_freq`). The initializer names are the parameter names "
        "with the `%s` prefix except where the exporter kept the other name of a tied weight "
        "(gpt2_dynamo's `hf.lm_head.weight`, t5_dynamo's `hf.lm_head.weight`). No initializer "
        "holds a transposed parameter (the reference stage fails if one would), so a gradient is "
        "used as stored. The reference stage finds the parameter of an initializer by name when "
        "name and value agree, else by exact value; the report stage checks every listed "
        "initializer equals its parameter bit for bit (dtype, shape, values), that each "
        "parameter is listed once per file, and that no unlisted initializer has a parameter's "
        "value." % (len(MODEL_NAMES) * len(EXPORTS), PARAM_PREFIX),
        "",
        "A test of file `F` of model `NAME`:",
        "",
        "```",
        "map = json(\"models/transformers/initializers.json\")[F]      // initializer -> param",
        "ref = read_npz(\"models/transformers/NAME_reference.npz\")",
        "feed every graph input X with ref[X]; labels = ref[\"labels\"]",
        "loss = mean cross-entropy of logits over the labels != -100  // vs ref[\"loss64\"]",
        "G = max over every ref member grad64/* of max|grad64/*|     // the model's gradient scale",
        "for (init, param) in map:",
        "    g    = the trained gradient of initializer init           // its shape",
        "    g64  = ref[\"grad64/\" + param]                            // float64, same shape",
        "    g32  = ref[\"grad32/\" + param]                            // float32, same shape",
        "    accept when max|g - g64| <= %g * max|g32 - g64| + %g * max|g64| + %g * G   (below)"
        % (JUDGE_FACTOR, JUDGE_FLOOR, JUDGE_MODEL_FLOOR),
        "every float initializer not in map: constant, no gradient",
        "```",
        "",
        "### Judging a float32 gradient",
        "",
        "Per tensor, on the max norm, in float64: accept a float32 gradient `g` when",
        "",
        "    max|g - grad64| <= %g * max|grad32 - grad64| + %g * max|grad64| + %g * G" % (
            JUDGE_FACTOR, JUDGE_FLOOR, JUDGE_MODEL_FLOOR),
        "",
        "(each max over the tensor's elements; G = the largest max|grad64| over all the model's "
        "parameters), and the loss when `|loss - loss64| <= %g * |loss32 - loss64| + %g * "
        "|loss64|`." % (JUDGE_FACTOR, JUDGE_FLOOR),
        "",
        "- Per tensor, not elementwise: `|grad32 - grad64|` is one draw of roundoff per element "
        "and is near 0 at many elements by chance, so an elementwise multiple of it rejects a "
        "correct float32 implementation that merely adds in another order; a floor relative to "
        "`|grad64|` does not rescue it where the gradient cancels. The report stage tries both "
        "on a second float32 PyTorch run (fused SDPA attention instead of the eager one, batch "
        "reversed): the elementwise rule `|g - grad64| <= max(10 |grad32 - grad64|, 1e-4 "
        "|grad64|)` rejects up to about a quarter of the elements of some tensors, while its "
        "max-norm error stays within ~3x of grad32's (numbers per model below).",
        "- Max norm, not L2: it compares worst roundoff with worst roundoff and still sees a "
        "single wrong element. The bound is ~1e-5 of the tensor's largest gradient, while a "
        "real bug (a wrong row, a missing term of a tied weight's sum, a transposed or "
        "mis-scaled gradient) is of the order of the gradient itself.",
        "- Factor %g: room for other kernels and reduction orders (the second PyTorch run needs "
        "at most ~3)." % JUDGE_FACTOR,
        "- `%g * max|grad64|` (~8 float32 ulps of the tensor's largest element) only matters "
        "if grad32 happened to be exact." % JUDGE_FLOOR,
        "- `%g * G`: the attention key biases (bert, vit; the key third of gpt2's `c_attn.bias`) "
        "have exact gradient 0 (softmax ignores a constant added to a whole row of scores), so "
        "there grad64 is roundoff (< 1e-18) and grad32 is pure float32 roundoff of cancelling "
        "terms (~1e-12 to 1e-10), whose size depends on the summation order; nothing relative "
        "to grad64 can judge it. This floor accepts roundoff there while staying below 1.5e-4 "
        "of every tensor whose gradient is not 0 (the smallest, in bert, is ~7e-6 G)." % (
            JUDGE_MODEL_FLOOR),
        "",
    ] + adamw_intro()


def adamw_intro():
    lr, (beta1, beta2), eps, wd = (ADAMW["lr"], ADAMW["betas"], ADAMW["eps"],
                                   ADAMW["weight_decay"])
    total = ADAMW_STEPS * lr
    return [
        "### AdamW reference (%s)" % ", ".join(ADAMW_MODELS),
        "",
        "Starting from the initial weights (the `torch.manual_seed(0)` model, i.e. the ONNX "
        "initializers), %d steps of `torch.optim.AdamW(params, lr=%g, betas=(%g, %g), eps=%g, "
        "weight_decay=%g, amsgrad=False, maximize=False, foreach=False)`, one parameter group "
        "holding every trainable parameter (biases, LayerNorm/RMSNorm weights and embeddings "
        "are decayed too), every step on the same batch (the stored inputs and `labels`) and "
        "the same loss as `loss64` (mean cross-entropy, `ignore_index=-100`), `train()` state, "
        "`zero_grad(set_to_none=True)` before each backward. Once in float64 (`model.double()`, "
        "the float32 casts kept float64 as for `grad64`) and once in float32. A tied weight "
        "is one parameter with one optimizer state, updated with its summed gradient. The update "
        "(PyTorch's, for t = 1..%d, m = v = 0 before the first step, g = the gradient at the "
        "current weights):" % (ADAMW_STEPS, lr, beta1, beta2, eps, wd, ADAMW_STEPS),
        "",
        "    w = w * (1 - lr * weight_decay)              # decoupled decay, before the Adam step",
        "    m = beta1 * m + (1 - beta1) * g",
        "    v = beta2 * v + (1 - beta2) * g * g",
        "    w = w - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)",
        "",
        "Members:",
        "",
        "- `adamw_losses64` float64 and `adamw_losses32` float32, shape `(%d,)`: element i is "
        "the loss after i steps (element 0 = `loss64` / `loss32`, the loss whose gradient makes "
        "step 1; element %d the loss after the last step);" % (ADAMW_STEPS + 1, ADAMW_STEPS),
        "- `adamw_after64/<param>` float64 and `adamw_after32/<param>` float32: the weights after "
        "the %d steps, in the parameter's shape, keyed as `grad64/` (a tied weight once, under "
        "its `named_parameters()` name). Every parameter while the npz stays within %d bytes, "
        "else only the parameters of at most %d values (each model's lines below say which). "
        "At present every npz fits (sizes below), and no parameter of these "
        "models has more than %d values anyway, so every parameter is there." % (
            ADAMW_STEPS, ADAMW_MAX_NPZ_BYTES, ADAMW_SMALL_PARAM, max(
                p.numel() for name in ADAMW_MODELS for p in build(name).parameters())),
        "",
        "A test (any float32 framework):",
        "",
        "```",
        "ref = read_npz(\"models/transformers/NAME_reference.npz\"); w = the initializers",
        "for t in 0..%d:" % ADAMW_STEPS,
        "    loss = forward(ref inputs); judge loss vs ref[\"adamw_losses64\"][t]  (below)",
        "    if t < %d: backward; AdamW step as above" % ADAMW_STEPS,
        "for every member adamw_after64/<param>: judge w[param] vs it (below)",
        "```",
        "",
        "Judging, in float64, each max over a tensor's elements: per step t, accept the loss when "
        "`|loss - losses64[t]| <= %g * |losses32[t] - losses64[t]| + %g * |losses64[t]|`; per "
        "tensor, accept the weights `w` when" % (JUDGE_FACTOR, JUDGE_FLOOR),
        "",
        "    max|w - w64| <= %g * max|w32 - w64| + %g * max|w64| + %g * steps * lr"
        % (JUDGE_FACTOR, JUDGE_FLOOR, ADAMW_STEP_FLOOR),
        "                    [+ steps * lr * %g * G / eps   for a roundoff-gradient tensor]"
        % JUDGE_MODEL_FLOOR,
        "",
        "with steps * lr = %g (so the third term is %g) and G the gradient rule's G (the largest "
        "max|grad64| of the model); a roundoff-gradient tensor is one with an element where "
        "`0 < |grad64| <= %g * G` (listed per model below: the attention key biases and gpt2's "
        "`c_attn.bias`, whose key third it holds)." % (total, ADAMW_STEP_FLOOR * total,
                                                      ROUNDOFF_ZERO),
        "",
        "- `%g * max|w32 - w64|`, `%g * max|w64|`: as for the gradient; a max norm per tensor, "
        "not elementwise." % (JUDGE_FACTOR, JUDGE_FLOOR),
        "- `%g * steps * lr`: Adam divides each element's gradient by its own running RMS + eps, "
        "so an element whose gradient is of the order of eps (%g) or changes sign gets an update "
        "whose float32 roundoff is a sizable part of that step, however accurate the rest of "
        "the tensor; whether a float32 run meets such an element is chance, and max|w32 - w64| "
        "of a tensor can be a few ulps by luck. Without this term the second float32 run "
        "below fails on vit (`layers.0.mlp.fc1.bias`); with it, it passes everywhere. It is "
        "%g of the most any weight can move (about lr per step), and far below what the "
        "optimizer mistakes below change (each model's line)." % (
            ADAMW_STEP_FLOOR, eps, ADAMW_STEP_FLOOR),
        "- `steps * lr * %g * G / eps` (%g x G here): the attention key biases have exact "
        "gradient 0, so their float32 gradient is roundoff (~1e-12 to 1e-10), and Adam turns a "
        "gradient g << eps into a step of about lr * g / eps: float64 moves them by ~1e-15, "
        "float32 by up to ~1e-4. The gradient rule accepts a gradient there up to ~%g * G; "
        "this term is the most such a gradient can move the weights, so a framework that "
        "passes the gradient rule is not failed here for its roundoff. A real nonzero "
        "gradient would move them by up to ~steps * lr = %g, 8 to 25 times this term for "
        "the G here." % (
            JUDGE_MODEL_FLOOR, total * JUDGE_MODEL_FLOOR / eps, JUDGE_MODEL_FLOOR, total),
        "- The report stage tries the rule on a second float32 run (%s) and on two mistakes, "
        "%s and %s, which it must reject (each model's lines below)." % (
            ADAMW_VARIANTS["alternative"], ADAMW_VARIANTS["no_decay"],
            ADAMW_VARIANTS["adam_l2"]),
        "",
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stage", choices=["all", "export", "reference", "report"], default="all")
    ap.add_argument("--models", default=",".join(MODEL_NAMES),
                    help="comma-separated subset of %s" % ",".join(MODEL_NAMES))
    args = ap.parse_args()
    names = [n for n in MODEL_NAMES if n in args.models.split(",")]
    torch.set_num_threads(1)
    if args.stage in ("all", "export"):
        stage_export(names)
    if args.stage in ("all", "reference"):
        stage_reference(names)
    if args.stage in ("all", "report"):
        stage_report(names)


if __name__ == "__main__":
    main()
