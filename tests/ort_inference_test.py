#!/usr/bin/env python3
"""The model `onnxtrain train` writes is ready for inference in ONNX Runtime, with the preprocessing
its metadata records, and the validation split of a class-sorted file covers every class.

1. A class-sorted dataset (uint8 images, 10 classes, rows sorted by label, as many user files are) is
   written as npz, with an unsorted test npz of the same distribution.
2. `onnxtrain train models/resnet_opset17.onnx` (BatchNormalization exported in training mode) trains
   on it with a held-out validation split; its last validation accuracy must be far above chance (the
   old split, the last 10% of rows, held out one class and never trained on it: 0%).
3. ONNX Runtime runs the written model on the raw uint8 test images, preprocessed from the model's
   metadata_props alone, one sample at a time (batch 1): its accuracy must equal the training run's
   final test accuracy, and its batched logits must equal `onnxtrain run`'s.
4. Inference mode: a sample's logits do not depend on the rest of its batch. With --keep-training-mode
   they do (BatchNorm normalises with the batch's statistics), which shows what the default fixes.
5. --bake-normalization: the same short run (same seed) written with its preprocessing baked takes the
   raw uint8 images in ONNX Runtime and gives the logits that the plain model gives on images
   preprocessed from its metadata; its metadata leave nothing to apply.

Needs numpy and onnxruntime: tools/setup-ort.sh makes build/ort-venv with them, and this script re-runs
itself with that interpreter when onnxruntime is not importable.

    tests/ort_inference_test.py --onnxtrain build/release/tools/onnxtrain
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_venv import ROOT, use_test_venv  # noqa: E402

use_test_venv(["numpy", "onnxruntime"])
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

from synthetic_images import CLASSES, write_datasets  # noqa: E402 (needs numpy, imported above)


def run(cmd):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (done.returncode, " ".join(cmd), done.stdout))
    return done.stdout


def preprocess(session, raw):
    """The model's own record of its preprocessing: x = (raw * scale - mean[c]) / std[c]."""
    meta = session.get_modelmeta().custom_metadata_map
    for key in ("onnxtrain.preprocess.scale", "onnxtrain.preprocess.mean", "onnxtrain.preprocess.std",
                "onnxtrain.preprocess.layout", "onnxtrain.classes"):
        if key not in meta:
            sys.exit("FAIL: the written model has no metadata_props entry %s (it has %s)" % (key, sorted(meta)))
    if meta["onnxtrain.preprocess.layout"] != "NCHW" or meta["onnxtrain.classes"] != str(CLASSES):
        sys.exit("FAIL: metadata layout %s, classes %s" % (meta["onnxtrain.preprocess.layout"], meta["onnxtrain.classes"]))
    scale = float(meta["onnxtrain.preprocess.scale"])
    mean = np.array([float(v) for v in meta["onnxtrain.preprocess.mean"].split(",")], dtype=np.float32)
    std = np.array([float(v) for v in meta["onnxtrain.preprocess.std"].split(",")], dtype=np.float32)
    x = raw.astype(np.float32) * np.float32(scale)
    return (x - mean.reshape(1, -1, 1, 1)) / std.reshape(1, -1, 1, 1)


def batch_dependence(session, x):
    """Max |logits of sample i alone - logits of sample i within the batch|."""
    name = session.get_inputs()[0].name
    batched = session.run(None, {name: x})[0]
    alone = np.concatenate([session.run(None, {name: x[i:i + 1]})[0] for i in range(len(x))])
    return float(np.abs(batched - alone).max()), batched, alone


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--onnxtrain", required=True)
    parser.add_argument("--keep", help="keep the files in this folder")
    args = parser.parse_args()
    workdir = args.keep or tempfile.mkdtemp(prefix="ort_inference_")
    os.makedirs(workdir, exist_ok=True)
    failures = []

    def check(label, ok, detail=""):
        print("  %-70s %s  %s" % (label, "ok" if ok else "FAIL", detail))
        if not ok:
            failures.append(label)

    train_npz, test_npz, x_test_raw, y_test = write_datasets(workdir, train_per_class=120, test_count=300)
    model = os.path.join(ROOT, "models", "resnet_opset17.onnx")
    trained = os.path.join(workdir, "resnet_trained.onnx")
    out = run([args.onnxtrain, "train", model, "--data", "npz:" + train_npz, "--test-data", "npz:" + test_npz,
               "--epochs", "2", "--batch", "32", "--lr", "0.05", "--validation", "0.2", "--seed", "3", "-o", trained])
    print(out)
    val = re.findall(r"validation loss [0-9.]+, accuracy ([0-9.]+)% \((\d+) samples\)", out)
    test = re.search(r"final: test loss [0-9.]+, accuracy ([0-9.]+)% \((\d+) samples\)", out)
    if not val or not test:
        sys.exit("FAIL: no validation or final test line in the output")
    val_accuracy, val_samples = float(val[-1][0]), int(val[-1][1])
    check("the validation split holds 20% of the rows", val_samples == 240, "%d samples" % val_samples)
    check("class-sorted data: validation accuracy far above chance (10%)", val_accuracy >= 60, "%.2f%%" % val_accuracy)
    train_accuracy = float(test.group(1))
    check("the training run learned the task", train_accuracy >= 60, "test accuracy %.2f%%" % train_accuracy)

    session = ort.InferenceSession(trained, providers=["CPUExecutionProvider"])
    x_test = preprocess(session, x_test_raw)
    spread, batched, alone = batch_dependence(session, x_test[:64])
    check("inference mode: a sample's logits do not depend on its batch", spread < 1e-3, "max diff %.3g" % spread)

    name = session.get_inputs()[0].name
    predictions = [int(np.argmax(session.run(None, {name: x_test[i:i + 1]})[0])) for i in range(len(x_test))]
    ort_accuracy = 100.0 * float(np.mean(np.array(predictions) == y_test))
    # Both count the same 300 samples; a logit tie broken differently could move one sample.
    check("ONNX Runtime at batch 1, preprocessed from the metadata, scores the run's test accuracy",
          abs(ort_accuracy - train_accuracy) <= 100.0 / len(y_test) + 0.005,
          "ORT %.2f%%, onnxtrain %.2f%%" % (ort_accuracy, train_accuracy))

    x_path, out_dir = os.path.join(workdir, "x.npy"), os.path.join(workdir, "run_out")
    np.save(x_path, x_test[:64])
    run([args.onnxtrain, "run", trained, "--input", x_path, "-o", out_dir])
    ours = np.load(os.path.join(out_dir, os.listdir(out_dir)[0]))
    diff = float(np.abs(ours - batched).max())
    check("onnxtrain run and ONNX Runtime give the same logits", diff <= 1e-3 + 1e-3 * float(np.abs(batched).max()),
          "max diff %.3g" % diff)

    kept = os.path.join(workdir, "resnet_training_mode.onnx")
    run([args.onnxtrain, "train", model, "--data", "npz:" + train_npz, "--test-data", "none", "--epochs", "1",
         "--limit-batches", "2", "--batch", "32", "--validation", "0", "--keep-training-mode", "-o", kept])
    spread_kept, _, _ = batch_dependence(ort.InferenceSession(kept, providers=["CPUExecutionProvider"]), x_test[:64])
    check("--keep-training-mode keeps batch statistics (logits depend on the batch)", spread_kept > 1e-2,
          "max diff %.3g" % spread_kept)

    short_run = [args.onnxtrain, "train", model, "--data", "npz:" + train_npz, "--test-data", "none", "--epochs", "1",
                 "--limit-batches", "2", "--batch", "32", "--validation", "0", "--seed", "5", "-o"]
    plain, baked = os.path.join(workdir, "resnet_plain.onnx"), os.path.join(workdir, "resnet_baked.onnx")
    run(short_run + [plain])
    run(short_run + [baked, "--bake-normalization"])
    plain_session = ort.InferenceSession(plain, providers=["CPUExecutionProvider"])
    baked_session = ort.InferenceSession(baked, providers=["CPUExecutionProvider"])
    baked_input = baked_session.get_inputs()[0]
    check("--bake-normalization: the model's input is the raw uint8 images", baked_input.type == "tensor(uint8)",
          baked_input.type)
    expected = plain_session.run(None, {plain_session.get_inputs()[0].name: preprocess(plain_session, x_test_raw[:64])})[0]
    got = baked_session.run(None, {baked_input.name: x_test_raw[:64]})[0]
    diff = float(np.abs(got - expected).max())
    check("--bake-normalization: raw images give the logits of metadata-preprocessed ones",
          diff <= 1e-4 * max(1.0, float(np.abs(expected).max())), "max diff %.3g" % diff)
    meta = baked_session.get_modelmeta().custom_metadata_map
    check("--bake-normalization: the metadata leave no preprocessing to apply",
          meta.get("onnxtrain.preprocess.scale") == "1" and "onnxtrain.preprocess.mean" not in meta
          and meta.get("onnxtrain.preprocess", "").startswith("none: feed raw uint8"),
          meta.get("onnxtrain.preprocess.baked", "(no onnxtrain.preprocess.baked)"))

    if failures:
        sys.exit("FAIL: %d checks: %s" % (len(failures), "; ".join(failures)))
    print("all checks passed")


if __name__ == "__main__":
    main()
