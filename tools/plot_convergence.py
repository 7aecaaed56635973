#!/usr/bin/python3
"""Validation-perplexity figure of tools/convergence_study.py's language-model runs, made with matplotlib
(Debian's python3-matplotlib; tools/install-deps.sh installs it). The study (standard library
only) writes the curves as JSON and runs this with /usr/bin/python3:

    tools/plot_convergence.py OUT/convergence_gpt_curves.json OUT/convergence_gpt_perplexity.png

The JSON: {"title": ..., "curves": [{"label": ..., "colour": "#rrggbb", "epochs": [1, 2, ...],
"val_perplexity": [...]}, ...]}; one line per curve, perplexity against epoch. The y axis is logarithmic
when the perplexities span more than a factor of 3; a non-finite perplexity (a diverged run) ends its line.
"""
import json
import math
import os
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, MaxNLocator
except ImportError as e:
    sys.exit("%s: %s (apt-get install python3-matplotlib, or tools/install-deps.sh)" % (sys.argv[0], e))


def finite_prefix(xs, ys):
    """The points up to the first non-finite y (None, NaN or inf)."""
    out_x, out_y = [], []
    for x, y in zip(xs, ys):
        if y is None or math.isnan(y) or math.isinf(y):
            break
        out_x.append(x)
        out_y.append(y)
    return out_x, out_y


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: %s CURVES.json OUT.png" % sys.argv[0])
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    fig, ax = plt.subplots(figsize=(8, 5))
    values = []
    for i, c in enumerate(doc["curves"]):
        xs, ys = finite_prefix(c["epochs"], c["val_perplexity"])
        label = c["label"]
        if len(xs) < len(c["epochs"]):
            label += " (diverged)"
        values += ys
        # single underneath, wide and light: gpipe (the same updates) lies on it and must stay visible
        wide = c.get("underlay", False)
        ax.plot(xs, ys, label=label, color=c.get("colour"), marker="o", markersize=3 if not wide else 6,
                linewidth=5 if wide else 1.5, alpha=0.35 if wide else 1.0, zorder=1 if wide else 2 + i)
    if values and max(values) / max(min(values), 1e-12) > 3:
        ax.set_yscale("log")
        # plain numbers, not 10^k; minor ticks labelled at 2, 3 and 5 times a power of ten only
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "%g" % v))
        ax.yaxis.set_minor_formatter(FuncFormatter(
            lambda v, _: "%g" % v if round(v / 10 ** math.floor(math.log10(v)), 6) in (2, 3, 5) else ""))
    last = max((max(c["epochs"]) for c in doc["curves"] if c["epochs"]), default=1)
    ax.set_xlim(0.7, last + 0.3)
    if last <= 20:
        ax.set_xticks(range(1, last + 1))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation perplexity")
    ax.set_title(doc.get("title", ""))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(sys.argv[2] + ".tmp.png", dpi=120)
    os.replace(sys.argv[2] + ".tmp.png", sys.argv[2])
    plt.close(fig)


if __name__ == "__main__":
    main()
