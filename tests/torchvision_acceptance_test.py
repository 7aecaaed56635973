#!/usr/bin/env python3
"""Your own model in, a deployable model out (issue 24): a torchvision network exported to ONNX trains
from the command line, and `onnxtrain eval`, ONNX Runtime at batch 1 and the training run's final line
give it the same accuracy.

1. models/torchvision/mobilenet_v2_w025.onnx is torchvision's MobileNetV2 (width 0.25, 10 classes) as
   the TorchScript exporter writes it from train() mode (models/torchvision/make_torchvision.py): 52
   BatchNormalization nodes in training mode, Dropout, Clip for ReLU6. CI has no torch, so the file is
   committed (about 1 MB).
2. A class-sorted uint8 npz (rows sorted by label, tests/synthetic_images.py) and an unsorted test npz.
   `onnxtrain train` trains on it with a stratified validation split and a seed, and reports the test
   npz's accuracy on its final line.
3. `onnxtrain eval` of the written model on the test npz (--json) must give that accuracy, and the loss.
4. ONNX Runtime runs the written model one sample at a time, the raw uint8 images preprocessed from the
   model's metadata_props alone: the same accuracy again, and the same loss (which ImageNet's mean and
   std would change). All three accuracies are well above chance (10%).

Needs numpy and onnxruntime: tools/setup-ort.sh makes build/ort-venv with them, and this script re-runs
itself with that interpreter when onnxruntime is not importable.

    tests/torchvision_acceptance_test.py --onnxtrain build/release/tools/onnxtrain
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_venv import ROOT, use_test_venv  # noqa: E402

use_test_venv(["numpy", "onnxruntime"])
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

from synthetic_images import CLASSES, write_datasets  # noqa: E402 (needs numpy, imported above)

MODEL = os.path.join(ROOT, "models", "torchvision", "mobilenet_v2_w025.onnx")
TRAIN_PER_CLASS, TEST_COUNT = 120, 300
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(1, 3, 1, 1)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(1, 3, 1, 1)


def run(cmd):
    start = time.monotonic()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (done.returncode, " ".join(cmd), done.stdout))
    print("$ %s  (%.1f s)" % (" ".join(cmd), time.monotonic() - start))
    return done.stdout


def metadata_preprocessing(meta):
    """x = (raw * scale - mean[c]) / std[c] from the model's metadata_props, nothing else."""
    for key in ("onnxtrain.preprocess.scale", "onnxtrain.preprocess.mean", "onnxtrain.preprocess.std",
                "onnxtrain.preprocess.layout", "onnxtrain.classes"):
        if key not in meta:
            sys.exit("FAIL: the written model has no metadata_props entry %s (it has %s)" % (key, sorted(meta)))
    scale = np.float32(meta["onnxtrain.preprocess.scale"])
    mean = np.array(meta["onnxtrain.preprocess.mean"].split(","), dtype=np.float32).reshape(1, -1, 1, 1)
    std = np.array(meta["onnxtrain.preprocess.std"].split(","), dtype=np.float32).reshape(1, -1, 1, 1)
    return lambda raw: (raw.astype(np.float32) * scale - mean) / std


def cross_entropy(logits, labels):
    """Mean cross-entropy of float32 logits, in float64."""
    z = logits.astype(np.float64)
    top = z.max(axis=1, keepdims=True)
    log_sum = np.log(np.exp(z - top).sum(axis=1)) + top[:, 0]
    return float(np.mean(log_sum - z[np.arange(len(labels)), labels]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--onnxtrain", required=True)
    parser.add_argument("--keep", help="keep the files in this folder")
    args = parser.parse_args()
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        check_all(args.onnxtrain, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="torchvision_acceptance_") as workdir:
            check_all(args.onnxtrain, workdir)


def check_all(onnxtrain, workdir):
    began = time.monotonic()
    failures = []

    def check(label, ok, detail=""):
        print("  %-72s %s  %s" % (label, "ok" if ok else "FAIL", detail))
        if not ok:
            failures.append(label)

    check("the committed torchvision export is under 5 MB", os.path.getsize(MODEL) < 5e6,
          "%.2f MB" % (os.path.getsize(MODEL) / 1e6))
    train_npz, test_npz, x_test_raw, y_test = write_datasets(workdir, TRAIN_PER_CLASS, TEST_COUNT)
    with np.load(train_npz) as f:
        check("the training file is uint8 and its rows are sorted by class",
              f["x"].dtype == np.uint8 and bool(np.all(np.diff(f["y"]) >= 0)), "%s %s" % (f["x"].dtype, f["x"].shape))

    # 2. Train from the command line.
    trained = os.path.join(workdir, "mobilenet_v2_trained.onnx")
    out = run([onnxtrain, "train", MODEL, "--data", "npz:" + train_npz, "--test-data", "npz:" + test_npz,
               "--epochs", "5", "--batch", "32", "--lr", "0.01", "--validation", "0.2", "--seed", "3", "-o", trained])
    print(out)
    val = re.findall(r"validation loss [0-9.]+, accuracy ([0-9.]+)% \((\d+) samples\)", out)
    final = re.search(r"final: test loss ([0-9.]+), accuracy ([0-9.]+)% \((\d+) samples\)", out)
    if not val or not final:
        sys.exit("FAIL: no validation or final test line in the output")
    counts = " ".join("%d:%d" % (c, TRAIN_PER_CLASS) for c in range(CLASSES))
    check("the data line before training shows the class counts", "class counts " + counts in out, counts)
    check("the validation split holds 20% of the rows", int(val[-1][1]) == TRAIN_PER_CLASS * CLASSES // 5,
          "%s samples" % val[-1][1])
    check("class-sorted data: last validation accuracy far above chance (10%)", float(val[-1][0]) >= 60,
          "%s%%" % val[-1][0])
    final_loss, final_accuracy, final_samples = final.group(1), final.group(2), int(final.group(3))
    check("the final line scores the whole test file", final_samples == TEST_COUNT, "%d samples" % final_samples)
    check("the training run learned the task: final test accuracy >= 60%", float(final_accuracy) >= 60,
          "%s%%" % final_accuracy)

    # 3. onnxtrain eval.
    eval_json = os.path.join(workdir, "eval.json")
    print(run([onnxtrain, "eval", trained, "--data", "npz:" + test_npz, "--json", eval_json]))
    with open(eval_json) as f:
        scored = json.load(f)
    eval_accuracy = "%.2f" % (100.0 * scored["accuracy"])
    check("onnxtrain eval counts the same samples", scored["samples"] == TEST_COUNT, "%d" % scored["samples"])
    check("onnxtrain eval gives the final line's accuracy", eval_accuracy == final_accuracy,
          "eval %s%%, final line %s%%" % (eval_accuracy, final_accuracy))
    check("onnxtrain eval gives the final line's loss (to its 4 decimals)",
          abs(scored["loss"] - float(final_loss)) <= 1e-4, "eval %.5f, final line %s" % (scored["loss"], final_loss))

    # 4. ONNX Runtime at batch 1, preprocessing from metadata_props only.
    session = ort.InferenceSession(trained, providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    check("metadata: NCHW layout and 10 classes",
          meta.get("onnxtrain.preprocess.layout") == "NCHW" and meta.get("onnxtrain.classes") == str(CLASSES),
          "layout %s, classes %s" % (meta.get("onnxtrain.preprocess.layout"), meta.get("onnxtrain.classes")))
    preprocess = metadata_preprocessing(meta)
    name = session.get_inputs()[0].name

    def batch_1_logits(x):
        return np.concatenate([session.run(None, {name: x[i:i + 1]})[0] for i in range(len(x))])

    logits = batch_1_logits(preprocess(x_test_raw))
    ort_accuracy = "%.2f" % (100.0 * float(np.mean(np.argmax(logits, axis=1) == y_test)))
    check("ONNX Runtime at batch 1 gives the final line's accuracy", ort_accuracy == final_accuracy,
          "ORT %s%%, final line %s%%" % (ort_accuracy, final_accuracy))
    ort_loss = cross_entropy(logits, y_test)
    check("ONNX Runtime at batch 1 gives the final line's loss (to its 4 decimals)",
          abs(ort_loss - float(final_loss)) <= 1e-4, "ORT %.5f, final line %s" % (ort_loss, final_loss))
    # The loss tells preprocessings apart: ImageNet's mean and std, a common default, score differently.
    imagenet = (x_test_raw.astype(np.float32) / 255 - IMAGENET_MEAN) / IMAGENET_STD
    imagenet_loss = cross_entropy(batch_1_logits(imagenet), y_test)
    check("(control) ImageNet's mean/std instead of the metadata's change that loss",
          abs(imagenet_loss - float(final_loss)) > 1e-3, "ORT %.5f" % imagenet_loss)
    batched = session.run(None, {name: preprocess(x_test_raw[:64])})[0]
    spread = float(np.abs(batched - logits[:64]).max())
    check("inference mode: a sample's logits do not depend on its batch", spread < 1e-3, "max diff %.3g" % spread)

    print("accuracy: final line %s%%, onnxtrain eval %s%%, ONNX Runtime (batch 1) %s%%; %.1f s"
          % (final_accuracy, eval_accuracy, ort_accuracy, time.monotonic() - began))
    if failures:
        sys.exit("FAIL: %d checks: %s" % (len(failures), "; ".join(failures)))
    print("all checks passed")


if __name__ == "__main__":
    main()
