#!/usr/bin/python3
"""How fast `onnxtrain train`'s data loader feeds ImageNet-sized batches on the CPU: a model that costs
almost nothing (GlobalAveragePool, Flatten, one Gemm to 10 classes, made here with the onnx package) trains
on synthetic 3x224x224 data, so the steps wait for the loader's thread. Prints samples/s, the loader wait
per step (ONNXTRAIN_CUDA_PROFILE's host phases: first call, then the mean of the later ones) and the
process's minor page faults (most of them the synthetic dataset's own, made once).

    benchmarks/data_loader_throughput.py [--binary build/release/tools/onnxtrain] [--batch 64] [--samples 2560]
"""
import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_model(path):
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 224, 224])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])
    weights = numpy_helper.from_array(np.random.default_rng(0).standard_normal((10, 3)).astype(np.float32), "W")
    bias = numpy_helper.from_array(np.zeros(10, np.float32), "B")
    nodes = [helper.make_node("GlobalAveragePool", ["input"], ["pooled"]),
             helper.make_node("Flatten", ["pooled"], ["flat"]),
             helper.make_node("Gemm", ["flat", "W", "B"], ["logits"], transB=1)]
    model = helper.make_model(helper.make_graph(nodes, "loader_probe", [x], [y], [weights, bias]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", default=os.path.join(ROOT, "build", "release", "tools", "onnxtrain"))
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--samples", type=int, default=2560)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="loader_probe_") as work:
        model = os.path.join(work, "probe.onnx")
        tiny_model(model)
        cmd = [args.binary, "train", model, "--data", "synthetic:3,224,224:10:%d" % args.samples,
               "--batch", str(args.batch), "--epochs", "1", "--validation", "0", "--test-data", "none",
               "-o", os.path.join(work, "out.onnx")]
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
        run = subprocess.run(cmd, env=dict(os.environ, ONNXTRAIN_CUDA_PROFILE="1"), capture_output=True, text=True)
        faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before
    if run.returncode != 0:
        sys.exit("onnxtrain failed (%d): %s\n%s" % (run.returncode, " ".join(cmd), run.stderr[-2000:]))
    rates = re.findall(r"([0-9.]+) samples/s", run.stderr + run.stdout)
    wait = re.search(r"the next batch \(data loader\).*", run.stderr)
    print("batch %d of 3x224x224, %d samples: %s samples/s (after the last step)" %
          (args.batch, args.samples, rates[-1] if rates else "?"))
    print("loader wait per step (ms): %s" % (wait.group(0)[len("the next batch (data loader)"):].strip() if wait else "?"))
    print("minor page faults: %d" % faults)


if __name__ == "__main__":
    main()
