#!/usr/bin/python3
"""Training curves of one or more `onnxtrain train --metrics FILE` runs, made with matplotlib (Debian's
python3-matplotlib; tools/install-deps.sh installs it). One figure, up to three panels:

  loss       the training loss per step (a moving average over --smooth steps) and the validation loss
             per epoch (markers, at the epoch's last step)
  accuracy   the validation accuracy per epoch, when the runs held out validation rows
  lr         the learning rate per step

    tools/plot_metrics.py run1.jsonl run2.jsonl --out curves.png [--labels a,b] [--smooth 20]

Each run is one line colour; its label is the file name unless --labels gives them. A file that is not a
metrics file (no JSON line with a "step" and a "loss") is an error, exit 1, naming the file and the line.
"""
import argparse
import json
import os
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as e:
    sys.exit("%s: %s (apt-get install python3-matplotlib, or tools/install-deps.sh)" % (sys.argv[0], e))


def read_run(path):
    """The steps (step, loss, lr) and the epochs (epoch, last step, val_loss, val_accuracy) of a metrics file."""
    steps, epochs = [], []
    try:
        with open(path) as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError as e:
                    sys.exit("%s: line %d is not JSON (%s): not an `onnxtrain train --metrics` file" % (path, number, e))
                if "step" in entry and "loss" in entry:
                    steps.append((entry["step"], entry["loss"], entry.get("lr")))
                elif "val_loss" in entry:
                    last = steps[-1][0] if steps else 0
                    epochs.append((entry.get("epoch"), last, entry["val_loss"], entry.get("val_accuracy")))
    except OSError as e:
        sys.exit("%s: %s" % (path, e.strerror))
    except UnicodeDecodeError:
        sys.exit("%s: not text: not an `onnxtrain train --metrics` file" % path)
    if not steps:
        sys.exit("%s: no step lines (JSON with \"step\" and \"loss\"): not an `onnxtrain train --metrics` file" % path)
    return steps, epochs


def moving_average(values, window):
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("metrics", nargs="+", help="--metrics files of onnxtrain train runs")
    parser.add_argument("--out", required=True, help="the PNG (or PDF, SVG: by the extension) to write")
    parser.add_argument("--labels", help="comma-separated run names, one per file (default: the file names)")
    parser.add_argument("--smooth", type=int, default=1, help="moving average over this many steps (default 1)")
    args = parser.parse_args()
    labels = args.labels.split(",") if args.labels else [os.path.basename(p) for p in args.metrics]
    if len(labels) != len(args.metrics):
        parser.error("--labels names %d runs, %d files given" % (len(labels), len(args.metrics)))
    if args.smooth < 1:
        parser.error("--smooth must be at least 1")
    runs = [read_run(p) for p in args.metrics]
    with_accuracy = any(a is not None for _, epochs in runs for *_, a in epochs)
    with_lr = any(lr is not None for steps, _ in runs for *_, lr in steps)
    panels = ["loss"] + (["accuracy"] if with_accuracy else []) + (["lr"] if with_lr else [])
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 3.2 * len(panels)), sharex=True, squeeze=False)
    axes = {name: axes[i][0] for i, name in enumerate(panels)}
    for (steps, epochs), label, colour in zip(runs, labels, plt.rcParams["axes.prop_cycle"].by_key()["color"] * 10):
        x = [s for s, _, _ in steps]
        axes["loss"].plot(x, moving_average([l for _, l, _ in steps], args.smooth), color=colour, label=label + " train")
        if epochs:
            axes["loss"].plot([e[1] for e in epochs], [e[2] for e in epochs], "o--", color=colour,
                              label=label + " validation")
        if with_accuracy and epochs:
            axes["accuracy"].plot([e[1] for e in epochs], [100 * e[3] for e in epochs], "o-", color=colour, label=label)
        if with_lr:
            axes["lr"].plot(x, [lr for _, _, lr in steps], color=colour, label=label)
    axes["loss"].set_ylabel("loss")
    axes["loss"].legend(fontsize="small")
    if with_accuracy:
        axes["accuracy"].set_ylabel("validation accuracy (%)")
    if with_lr:
        axes["lr"].set_ylabel("learning rate")
    axes[panels[-1]].set_xlabel("step")
    fig.tight_layout()
    try:
        fig.savefig(args.out, dpi=110)
    except OSError as e:
        sys.exit("%s: %s" % (args.out, e.strerror))
    print("wrote %s (%d runs: %s)" % (args.out, len(runs), ", ".join(panels)))


if __name__ == "__main__":
    main()
