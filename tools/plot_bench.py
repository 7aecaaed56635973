#!/usr/bin/python3
"""Figures of an `onnxtrain bench --json FILE` document, made with matplotlib (Debian's
python3-matplotlib; tools/install-deps.sh installs it). One PNG of each kind per model:

  throughput-MODEL.png   samples/s per strategy: the median as a bar, min-max as a whisker, the
                         prediction as a marker
  speedup-MODEL.png      speed-up over one thread against the devices (stages, replicas, workers)
  memory-MODEL.png       pipeline strategies: the executor's memory per stage, stacked (weights, working
                         copy, stashed versions, activations, optimizer state)
  loss-MODEL.png         the loss against the step, one line per strategy

    tools/plot_bench.py bench.json --out report/
"""
import argparse
import json
import os
import re
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as e:
    sys.exit("%s: %s (apt-get install python3-matplotlib, or tools/install-deps.sh)" % (sys.argv[0], e))


def finish(fig, ax, title, path, **legend):
    """Titles the axes, places the legend, writes the PNG and frees the figure."""
    ax.set_title(title)
    ax.legend(**legend)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def label(run):
    return run["strategy"] + (" (1 thread)" if run["threads"] == 1 else "")


def workers(strategy):
    """Devices a strategy spec uses: the count after the name (gpipe:NxM: N; ps:W:S: W)."""
    m = re.match(r"[a-z]+:(\d+)", strategy)
    return int(m.group(1)) if m else 1


def model_tag(path):
    return os.path.splitext(os.path.basename(path))[0]


def plot_throughput(runs, title, path):
    ok = [r for r in runs if "measured" in r]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(ok)), 4))
    xs = range(len(ok))
    med = [r["measured"]["samples_per_s"]["median"] for r in ok]
    lo = [m - r["measured"]["samples_per_s"]["min"] for m, r in zip(med, ok)]
    hi = [r["measured"]["samples_per_s"]["max"] - m for m, r in zip(med, ok)]
    ax.bar(xs, med, yerr=[lo, hi], capsize=4, color="tab:blue", label="measured (median, min-max)")
    pred = [(i, r["predicted"]["samples_per_s"]) for i, r in enumerate(ok) if r.get("predicted")]
    if pred:
        ax.scatter([i for i, _ in pred], [p for _, p in pred], color="tab:orange", marker="D", zorder=3,
                   label="predicted")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([label(r) for r in ok], rotation=30, ha="right")
    ax.set_ylabel("samples/s")
    finish(fig, ax, title, path, fontsize=8, loc="lower right")


def plot_speedup(runs, title, path):
    fig, ax = plt.subplots(figsize=(7, 4))
    kinds = {}
    for r in runs:
        if "measured" not in r or r["threads"] == 1:
            continue
        kinds.setdefault(r["strategy"].split(":")[0], []).append(
            (workers(r["strategy"]), r["measured"]["speedup_vs_one_thread"]))
    for kind, points in sorted(kinds.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=kind)
    ax.axhline(1.0, color="gray", linestyle=":", linewidth=1)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("devices (stages, replicas or workers)")
    ax.set_ylabel("speed-up over one thread")
    finish(fig, ax, title, path, fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))


MEMORY_PARTS = [("weight_bytes", "weights"), ("working_bytes", "working copy"), ("stash_bytes", "stashed versions"),
                ("activation_bytes", "activations"), ("optimizer_bytes", "optimizer state")]


def plot_memory(runs, title, path):
    rows = [(label(r), s) for r in runs if "measured" in r and isinstance(r["measured"].get("report"), dict)
            and r["measured"]["report"].get("kind") == "pipeline" for s in r["measured"]["report"]["stages"]]
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(max(7.5, 0.9 * len(rows) + 2), 4.5))
    bottom = [0.0] * len(rows)
    for key, name in MEMORY_PARTS:
        values = [s.get(key, 0) / 1e6 for _, s in rows]
        ax.bar(range(len(rows)), values, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(["%s stage %d" % (l, s["stage"]) for l, s in rows], fontsize=8, rotation=30, ha="right")
    ax.set_ylabel("MB (the executor's accounting)")
    finish(fig, ax, title, path, fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return True


def plot_loss(runs, title, path):
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for r in runs:
        if "measured" in r and r["threads"] != 1:
            steps = r["measured"]["loss_by_step"]
            ax.plot([s for s, _ in steps], [l for _, l in steps], label=label(r))
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    finish(fig, ax, title, path, fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", help="the document of onnxtrain bench --json")
    parser.add_argument("--out", default=".", help="folder for the PNG files (default: here)")
    args = parser.parse_args()
    with open(args.json) as f:
        doc = json.load(f)
    os.makedirs(args.out, exist_ok=True)
    machine = doc["machine"]
    models = []
    for run in doc["runs"]:
        if run["model"] not in models:
            models.append(run["model"])
    written = []
    for model in models:
        runs = [r for r in doc["runs"] if r["model"] == model]
        tag = model_tag(model)
        title = "%s, batch %d, %s threads (%s)" % (tag, runs[0]["batch"], machine.get("threads"), machine.get("date", "")[:10])
        for kind, plot in (("throughput", plot_throughput), ("speedup", plot_speedup), ("memory", plot_memory),
                           ("loss", plot_loss)):
            path = os.path.join(args.out, "%s-%s.png" % (kind, tag))
            if plot(runs, title, path) is not False:
                written.append(path)
    print("\n".join(written))


if __name__ == "__main__":
    main()
