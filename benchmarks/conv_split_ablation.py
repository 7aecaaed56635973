#!/usr/bin/python3
"""Would splitting one convolution into two let a 2-stage pipeline balance? The ablation behind the
README's "Why pipedream:2 stays near 1.4x on the Fashion-MNIST CNN".

A pipeline stage is a range of whole nodes, so the CNN's conv2 (8 -> 16 channels, 3x3 over 14x14), about
half of a step's kernel time, always lands on one stage. A planner could cut conv2 itself in two, one part
per stage, if the parts together cost what the whole does. This script writes the two ways of cutting it
and times them with the executor's kernels, one change at a time against the unchanged model:
  oc K   by output channels: Conv(X, W[:K], B[:K]) and Conv(X, W[K:], B[K:]), then Concat on channels;
  ic K   by input channels: Conv(X[:, :K], W[:, :K], B) + Conv(X[:, K:], W[:, K:]) (Slice, then Add).
Each model trains with the same weights; the script prints, per model, conv2's kernels (forward and
ConvGrad, summed over the parts, plus the Concat/Slice/Add and their gradients) and the whole step, from
`training_step_profile` at one thread.

    python3 benchmarks/conv_split_ablation.py --build build/release [--model models/cnn_opset17.onnx]
        [--node /conv2/Conv] [--batch 64] [--steps 300] [--splits oc8,oc6,ic4] [--rounds 2]

Needs the onnx and numpy modules (any version that reads opset 17). Results of 2026-12-06 are in the
README.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper


def split_conv(model, node_name, kind, k):
    """The model with Conv `node_name` cut in two along `kind` ('oc' or 'ic') at channel k."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    index = next(i for i, n in enumerate(g.node) if n.name == node_name)
    conv = g.node[index]
    if conv.op_type != "Conv" or any(a.name == "group" and a.i != 1 for a in conv.attribute):
        sys.exit(f"{node_name}: not a Conv of one group")
    inits = {i.name: i for i in g.initializer}
    x, w_name = conv.input[0], conv.input[1]
    b_name = conv.input[2] if len(conv.input) > 2 else ""
    w = numpy_helper.to_array(inits[w_name])
    bias = numpy_helper.to_array(inits[b_name]) if b_name else None
    y = conv.output[0]
    axis_size = w.shape[0] if kind == "oc" else w.shape[1]
    if not 0 < k < axis_size:
        sys.exit(f"{kind}{k}: the split must leave channels on both sides (1..{axis_size - 1})")
    g.initializer.remove(inits[w_name])
    if b_name and kind == "oc":
        g.initializer.remove(inits[b_name])
    nodes = []
    for part, (lo, hi) in enumerate([(0, k), (k, axis_size)]):
        piece = f"{w_name}.part{part}"
        g.initializer.append(numpy_helper.from_array(np.ascontiguousarray(w[lo:hi] if kind == "oc" else w[:, lo:hi]),
                                                     piece))
        inputs = [x, piece]
        if kind == "oc" and b_name:
            g.initializer.append(numpy_helper.from_array(bias[lo:hi].copy(), f"{b_name}.part{part}"))
            inputs.append(f"{b_name}.part{part}")
        if kind == "ic":
            for name, value in ((f"starts{part}", lo), (f"ends{part}", hi)):
                g.initializer.append(numpy_helper.from_array(np.array([value], np.int64), f"{node_name}.{name}"))
            sliced = f"{x}.part{part}"
            nodes.append(helper.make_node("Slice", [x, f"{node_name}.starts{part}", f"{node_name}.ends{part}",
                                                    f"{node_name}.axis"], [sliced], name=f"{node_name}.slice{part}"))
            inputs = [sliced, piece] + ([b_name] if b_name and part == 0 else [])
        part_node = helper.make_node("Conv", inputs, [f"{y}.part{part}"], name=f"{node_name}.part{part}")
        part_node.attribute.extend(conv.attribute)
        nodes.append(part_node)
    if kind == "ic":
        g.initializer.append(numpy_helper.from_array(np.array([1], np.int64), f"{node_name}.axis"))
        nodes.append(helper.make_node("Add", [f"{y}.part0", f"{y}.part1"], [y], name=f"{node_name}.add"))
    else:
        nodes.append(helper.make_node("Concat", [f"{y}.part0", f"{y}.part1"], [y], axis=1, name=f"{node_name}.concat"))
    g.node.remove(conv)
    for offset, n in enumerate(nodes):
        g.node.insert(index + offset, n)
    onnx.checker.check_model(m)
    return m


def profile(build, model_path, batch, steps, node_name):
    """(conv2's kernels in ms a step, the step's kernels in ms) from training_step_profile at one thread."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([os.path.join(build, "benchmarks", "training_step_profile"), model_path, str(batch),
                          str(steps), "1000"], env=env, capture_output=True, text=True, check=True).stdout
    total = float(re.search(r"kernels node by node \(medians\) ([0-9.]+) ms", out).group(1))
    conv = 0.0
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0].startswith(node_name):
            conv += float(fields[2])
    return conv, total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build/release")
    parser.add_argument("--model", default="models/cnn_opset17.onnx")
    parser.add_argument("--node", default="/conv2/Conv")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--splits", default="oc8,oc6,ic4", help="comma-separated ocK / icK")
    parser.add_argument("--rounds", type=int, default=2, help="every model once per round, interleaved")
    args = parser.parse_args()
    model = onnx.load(args.model)
    with tempfile.TemporaryDirectory() as folder:
        variants = [("whole", args.model)]
        for spec in args.splits.split(","):
            match = re.fullmatch(r"(oc|ic)(\d+)", spec.strip())
            if not match:
                sys.exit(f"--splits: '{spec}' is not ocK or icK")
            path = os.path.join(folder, f"{spec}.onnx")
            onnx.save(split_conv(model, args.node, match.group(1), int(match.group(2))), path)
            variants.append((spec, path))
        print(f"{args.model}, {args.node}, batch {args.batch}, {args.steps} steps, one thread; ms a step "
              f"(kernels node by node, medians)")
        print(f"{'round':>5} {'variant':>8} {'the conv':>9} {'whole step':>11}")
        for r in range(args.rounds):
            for name, path in variants:
                conv, total = profile(args.build, path, args.batch, args.steps, args.node)
                print(f"{r + 1:>5} {name:>8} {conv:9.3f} {total:11.3f}", flush=True)


if __name__ == "__main__":
    main()
