#!/usr/bin/env python3
"""`onnxtrain train --tensorboard DIR` writes event files that TensorBoard itself reads: its
EventAccumulator (what `tensorboard --logdir` runs) finds every scalar of the run's --metrics file, with
the same step and value. A record with one bit flipped is dropped by TensorBoard's reader, which shows it
checks the CRC-32C that onnxtrain writes (with a wrong CRC it would drop every record).

Needs the tensorboard package: tools/setup-ort.sh puts it in build/ort-venv.

    tests/tensorboard_reader_test.py --onnxtrain build/release/tools/onnxtrain
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_venv import ROOT, use_test_venv  # noqa: E402

use_test_venv(["tensorboard"])
from tensorboard.backend.event_processing import event_accumulator, event_file_loader  # noqa: E402

FIELDS = {"loss": "train/loss", "lr": "train/lr", "samples_per_s": "train/samples_per_s",
          "val_loss": "val/loss", "val_accuracy": "val/accuracy", "test_loss": "test/loss",
          "test_accuracy": "test/accuracy"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--onnxtrain", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        run = os.path.join(work, "tb", "mlp")
        subprocess.run([args.onnxtrain, "train", os.path.join(ROOT, "models", "mlp_opset17.onnx"),
                        "--data", "synthetic:1,28,28:10:640", "--epochs", "2", "--test-data",
                        "synthetic:1,28,28:10:128", "--metrics", os.path.join(work, "m.jsonl"),
                        "--tensorboard", run, "-o", os.path.join(work, "m.onnx")], check=True)
        expected = {}
        step = 0
        with open(os.path.join(work, "m.jsonl")) as f:
            for line in f:
                entry = json.loads(line)
                step = entry.get("step", step)
                for key, tag in FIELDS.items():
                    if key in entry:
                        expected.setdefault(tag, []).append((step, entry[key]))
        accumulator = event_accumulator.EventAccumulator(os.path.join(work, "tb", "mlp"))
        accumulator.Reload()
        tags = sorted(accumulator.Tags()["scalars"])
        assert tags == sorted(expected), "TensorBoard found %s, the metrics file has %s" % (tags, sorted(expected))
        for tag, values in expected.items():
            got = [(e.step, e.value) for e in accumulator.Scalars(tag)]
            assert len(got) == len(values), "%s: %d events, %d metrics lines" % (tag, len(got), len(values))
            for (step_got, value_got), (step_want, value_want) in zip(got, values):
                assert step_got == step_want and abs(value_got - value_want) <= 1e-6 * max(1.0, abs(value_want)), \
                    "%s: TensorBoard (step %d, %g), metrics (step %d, %g)" % (tag, step_got, value_got,
                                                                              step_want, value_want)
        events = glob.glob(os.path.join(run, "*tfevents*"))
        assert len(events) == 1, events
        data = bytearray(open(events[0], "rb").read())
        whole = sum(1 for _ in event_file_loader.EventFileLoader(events[0]).Load())
        data[-6] ^= 1  # inside the last record's body
        damaged = os.path.join(work, "damaged.tfevents")
        open(damaged, "wb").write(bytes(data))
        kept = sum(1 for _ in event_file_loader.EventFileLoader(damaged).Load())
        assert kept == whole - 1, "TensorBoard read %d of %d events from the damaged file" % (kept, whole)
        print("tensorboard_reader_test: TensorBoard %s read %d scalars under %d tags, equal to --metrics; "
              "a damaged record was dropped" % (__import__("tensorboard").__version__,
                                                 sum(len(v) for v in expected.values()), len(tags)))


if __name__ == "__main__":
    main()
