#!/usr/bin/env python3
"""Convergence and throughput study of onnxtrain's pipeline strategies (issue 6).

Trains the Fashion-MNIST CNN and the small ResNet (on Fashion-MNIST padded to 3x32x32) with every
strategy -- single, gpipe (M micro-batches), naive, pipedream, spectrain -- over N stages, with the same
seed, learning rate, batch and number of steps (--seeds 1,2,3: every convergence run once per seed, the tables
then give mean ± sd over the seeds and how many seeds diverged), and writes:

  OUT/convergence.md           a table per model (final test accuracy, loss averaged over a window ending at
                               25%/50%/100% of the steps, mean staleness forward/backward over the stages,
                               SpecTrain's prediction error, samples/s), the 2-stage throughput table and
                               last "Divergence by learning rate": per model, strategy against every
                               (optimizer, lr) of --cnn-optimizers/--cnn-lr (--resnet-optimizers/--resnet-lr)
  OUT/convergence_MODEL.svg    smoothed training loss against step, one line per strategy and N
  OUT/runs/                    every run's stdout, stderr and --metrics file

Language model (--models gpt, not in the default): the 2-layer GPT-2 (models/transformers/gpt2_torchscript.onnx)
on the bytes of /usr/share/common-licenses/GPL-3 in windows of 64 tokens (the last 10% held out), batch 16, AdamW
lr 0.003 cosine, --gpt-epochs epochs, with single and every pipeline strategy over --gpt-stages stages:

  OUT/convergence.md                  a GPT table (validation perplexity after epoch 1, 5 and the last, the
                                      final training loss, staleness, SpecTrain's prediction error)
  OUT/convergence_gpt_perplexity.png  validation perplexity against epoch, one line per strategy (drawn by
                                      tools/plot_convergence.py under /usr/bin/python3 with matplotlib, from
                                      OUT/convergence_gpt_curves.json)

Throughput part: on each model, single (the default OpenMP threads, and OMP_NUM_THREADS=1) against
2 stages (pipedream and gpipe), samples/s, the ratio to single and the bubble per stage from the report.

Python 3 standard library only; the loss plots are hand-written SVG (the GPT-2 figure: tools/plot_convergence.py,
run as a separate /usr/bin/python3 process with matplotlib; --plot-python). Rerun from the repository root:

  python3 tools/convergence_study.py                       # the whole study: 9 minutes on 2 busy cores
  python3 tools/convergence_study.py --models cnn --cnn-steps 400 --out /tmp/quick
  python3 tools/convergence_study.py --models cnn --cnn-lr 0.08,0.04,0.01 --seeds 1,2,3 --throughput off
  python3 tools/convergence_study.py --models gpt --out build/study-gpt    # GPT-2, 10 epochs: ~3 minutes
  python3 tools/convergence_study.py --models gpt --gpt-epochs 1 --gpt-limit-batches 5 --out /tmp/gpt-smoke

Each onnxtrain run is sequential (never two at once): the figures are measurements, so run it on an idle
machine (--max-load waits for the 1-minute load average to drop first); the load is recorded at start and end.
"""

import argparse
import gzip
import json
import math
import os
import re
import resource
import statistics
import struct
import subprocess
import sys
import time
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLOT_CONVERGENCE = os.path.join(REPO, "tools", "plot_convergence.py")
GPT_TEXT = "/usr/share/common-licenses/GPL-3"
STRATEGIES = ["single", "gpipe", "1f1b", "naive", "pipedream", "spectrain", "2bw"]
MICRO_BATCHED = ("gpipe", "1f1b", "2bw")  # take --micro-batches: M micro-batches, one update per mini-batch
COLOURS = {"single": "#000000", "gpipe": "#1f77b4", "1f1b": "#17becf", "naive": "#d62728", "pipedream": "#2ca02c",
           "spectrain": "#9467bd", "2bw": "#8c564b"}
DASHES = {1: "", 2: "", 4: "", 8: "6,3"}  # N=8 dashed so it reads apart from N=4 in the same colour

FASHION_DIR = "/usr/share/datasets/fashion-mnist"


# --------------------------------------------------------------------------------------------------
# Data: Fashion-MNIST as (N,3,32,32) uint8 in a Keras-layout .npz (what `--data npz:FILE` reads).

def read_idx(path):
    """An IDX file (gzip): returns (dims, payload bytes)."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype, rank = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise SystemExit(f"{path}: not an IDX file of unsigned bytes")
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return dims, data[4 + 4 * rank:]


def npy_bytes_header(descr, shape):
    """A .npy version 1.0 header: the dict padded so the data starts at a multiple of 64 bytes."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")  # numpy's own spelling
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    total = 10 + len(header) + 1
    header += " " * ((64 - total % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1")


def padded_rgb(images, count):
    """28x28 images (bytes) -> 32x32 (2 zero pixels each side), the channel repeated 3 times."""
    zero_rows = bytes(2 * 32)
    out = bytearray()
    for i in range(count):
        img = images[i * 784:(i + 1) * 784]
        plane = zero_rows + b"".join(b"\0\0" + img[r * 28:(r + 1) * 28] + b"\0\0" for r in range(28)) + zero_rows
        out += plane * 3
    return bytes(out)


def write_npz(path, arrays):
    """arrays: name -> (descr, shape, bytes). Stored (not deflated) members, written atomically."""
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as z:
        for name, (descr, shape, payload) in arrays.items():
            z.writestr(name + ".npy", npy_bytes_header(descr, shape) + payload)
    os.replace(tmp, path)


def fashion_npz(cache, test_rows):
    """Writes (once) CACHE/fashion_mnist_3x32x32.npz (all rows) and, when test_rows > 0, a test file of
    the first test_rows test images (the ResNet's test pass over all 10000 costs ~20 s a run on 2 cores).
    Returns (train npz, test npz)."""
    os.makedirs(cache, exist_ok=True)
    full = os.path.join(cache, "fashion_mnist_3x32x32.npz")
    split = {}
    if not os.path.exists(full) or (test_rows and not os.path.exists(os.path.join(cache, f"fashion_mnist_3x32x32_test{test_rows}.npz"))):
        for name, prefix in (("train", "train"), ("test", "t10k")):
            (n, h, w), images = read_idx(os.path.join(FASHION_DIR, f"{prefix}-images-idx3-ubyte.gz"))
            (m,), labels = read_idx(os.path.join(FASHION_DIR, f"{prefix}-labels-idx1-ubyte.gz"))
            if (h, w) != (28, 28) or n != m:
                raise SystemExit(f"{FASHION_DIR}: unexpected {prefix} files ({n}x{h}x{w} images, {m} labels)")
            split[name] = (n, images, labels)
    if not os.path.exists(full):
        print(f"writing {full} (Fashion-MNIST padded to 3x32x32, uint8)", flush=True)
        arrays = {}
        for name, (n, images, labels) in split.items():
            arrays["x_" + name] = ("|u1", (n, 3, 32, 32), padded_rgb(images, n))
            arrays["y_" + name] = ("|u1", (n,), labels)
        write_npz(full, arrays)
    test = full
    if test_rows:
        test = os.path.join(cache, f"fashion_mnist_3x32x32_test{test_rows}.npz")
        if not os.path.exists(test):
            n, images, labels = split["test"]
            k = min(test_rows, n)
            write_npz(test, {"x_test": ("|u1", (k, 3, 32, 32), padded_rgb(images, k)),
                             "y_test": ("|u1", (k,), labels[:k])})
    return full, test


# --------------------------------------------------------------------------------------------------
# Runs.

HEADER_RE = re.compile(r"^(\w+), (\d+) stages(?:, (\d+) micro-batches)?: (\d+) mini-batches, (\d+) samples in "
                       r"([\d.]+) s, ([\d.]+) samples/s")
STAGE_RE = re.compile(r"^\s+(\d+)\s+\[(\d+),(\d+)\)\s+(\d+)\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+) /\s+([\d.]+)"
                      r"(?:\s+[\d.]+){5}(?:\s+(\S+))?\s*$")  # weights, stash, activ, optim, other MiB
FINAL_RE = re.compile(r"^final: test loss (\S+), accuracy ([\d.]+)%")
# single stops at the first non-finite loss (the pipelines log it as null and go on): a divergence, not only an error
STOPPED_RE = re.compile(r"the loss became (\S+) at step (\d+)")
# The divergence guard's other stop: the weights overflow the outputs with every loss still finite.
DIVERGED_EVAL_RE = re.compile(r"the (validation|test) loss is (NaN|infinite)")


def parse_float(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return float("nan")


def run_onnxtrain(args, model, strategy, stages, steps, extra, tag, env_extra=None, seed=None):
    """One onnxtrain train run (seed: the first of --seeds when None); returns a dict of what it reported
    (or the error)."""
    seed = args.seeds[0] if seed is None else seed
    runs = os.path.join(args.out, "runs")
    os.makedirs(runs, exist_ok=True)
    metrics = os.path.join(runs, tag + ".jsonl")
    if model.get("epochs"):
        # epochs with a validation pass after each (the language model); steps: --limit-batches per epoch, 0 all
        schedule = ["--epochs", str(model["epochs"])] + (["--limit-batches", str(steps)] if steps else []) + \
                   ["--validation", str(model["validation"])]
    else:
        schedule = ["--epochs", "1", "--limit-batches", str(steps), "--validation", "0"]
    cmd = [args.onnxtrain, "train", model["path"], "--seed", str(seed), "--batch", str(model["batch"]),
           "--lr", str(model["lr"]), "--optimizer", model["optimizer"], "--schedule", model["schedule"]] + \
          schedule + ["--log-every", "1000000",
                      "--metrics", metrics, "-o", os.path.join(runs, tag + ".onnx")] + model["data"] + extra
    if strategy != "single":
        cmd += ["--strategy", strategy, "--stages", str(stages)]
        if strategy in MICRO_BATCHED:
            cmd += ["--micro-batches", str(args.micro_batches)]
    env = dict(os.environ, **(env_extra or {}))
    start, usage = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.time() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
    with open(os.path.join(runs, tag + ".out"), "w") as f:
        f.write(proc.stdout)
    with open(os.path.join(runs, tag + ".err"), "w") as f:
        f.write(proc.stderr)
    r = {"strategy": strategy, "stages": stages, "tag": tag, "seed": seed, "wall_s": wall, "cpu_s": cpu,
         "rc": proc.returncode, "cmd": " ".join(cmd), "losses": [], "stage_rows": [], "accuracy": float("nan"),
         "test_loss": float("nan"), "samples_per_s": float("nan"), "val": []}
    if proc.returncode != 0:
        tail = [line for line in proc.stderr.splitlines() if not line.startswith("step ")]
        r["error"] = "\n".join(tail[-6:])
        m = STOPPED_RE.search(proc.stderr)
        if m:
            r["diverged_step"] = int(m.group(2))
        elif DIVERGED_EVAL_RE.search(proc.stderr):
            r["diverged_step"] = steps  # noticed at the evaluation after the last step
    for line in proc.stdout.splitlines():
        m = HEADER_RE.match(line)
        if m:
            r["samples_per_s"] = float(m.group(7))
        m = STAGE_RE.match(line)
        if m:
            r["stage_rows"].append({"stage": int(m.group(1)), "nodes": f"[{m.group(2)},{m.group(3)})",
                                    "samples_per_s": float(m.group(5)), "bubble": float(m.group(6)),
                                    "stale_f": float(m.group(7)), "stale_b": float(m.group(8)),
                                    "pred_error": parse_float(m.group(9))})
        m = FINAL_RE.match(line)
        if m:
            r["test_loss"], r["accuracy"] = parse_float(m.group(1)), float(m.group(2))
    if os.path.exists(metrics):
        last_rate = float("nan")
        with open(metrics) as f:
            for line in f:
                d = json.loads(line)
                if "step" in d and "loss" in d:
                    r["losses"].append(float("nan") if d["loss"] is None else float(d["loss"]))
                    last_rate = d.get("samples_per_s", last_rate)
                elif "val_loss" in d:
                    # per-epoch validation; "epoch" counts from 0 there, as in the step lines
                    r["val"].append({"epoch": int(d["epoch"]),
                                     "loss": float("nan") if d["val_loss"] is None else float(d["val_loss"]),
                                     "perplexity": float("nan") if d.get("val_perplexity") is None
                                     else float(d["val_perplexity"])})
        if strategy == "single":
            r["samples_per_s"] = last_rate  # the same cumulative mean the pipeline header prints
    return r


def window_mean(losses, end, width):
    """Mean of losses[end-width:end] (steps end-width+1..end); NaN when any is NaN (diverged)."""
    part = losses[max(0, end - width):end]
    if not part:
        return float("nan")
    return sum(part) / len(part)


def fmt(x, spec):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def seeds_text(seeds):
    return f"seed {seeds[0]}" if len(seeds) == 1 else "seeds " + ", ".join(map(str, seeds))


# --------------------------------------------------------------------------------------------------
# SVG plot.

def smooth(losses, width):
    out, total, window = [], 0.0, []
    for x in losses:
        if math.isnan(x) or math.isinf(x):
            break  # diverged: the line stops here
        window.append(x)
        total += x
        if len(window) > width:
            total -= window.pop(0)
        out.append(total / len(window))
    return out


def nice_ticks(lo, hi, count=6):
    span = hi - lo
    raw = span / count
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=10 * mag)
    first = math.ceil(lo / step) * step
    ticks = []
    t = first
    while t <= hi + 1e-9:
        ticks.append(round(t, 10))
        t += step
    return ticks


def write_svg(path, title, results, steps, width):
    W, H, left, right, top, bottom = 880, 480, 70, 250, 40, 55
    pw, ph = W - left - right, H - top - bottom
    curves = [(r, smooth(r["losses"], width)) for r in results if r["losses"]]
    finite = [v for _, c in curves for v in c]
    ymax = min(max(finite) if finite else 2.5, 3.0)
    ymin = 0.0
    ymax = max(ymax, 0.5)

    def sx(step):
        return left + pw * (step - 1) / max(1, steps - 1)

    def sy(v):
        return top + ph * (1 - (min(v, ymax) - ymin) / (ymax - ymin))

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
         f'font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<clipPath id="plot"><rect x="{left}" y="{top}" width="{pw}" height="{ph}"/></clipPath>',
         f'<text x="{left + pw / 2}" y="22" text-anchor="middle" font-size="15">{title}</text>']
    for t in nice_ticks(ymin, ymax):
        y = sy(t)
        o.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        o.append(f'<line x1="{left - 5}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" stroke="black"/>')
        o.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{t:g}</text>')
    for t in nice_ticks(0, steps):
        x = sx(max(t, 1))
        o.append(f'<line x1="{x:.1f}" y1="{top + ph}" x2="{x:.1f}" y2="{top + ph + 5}" stroke="black"/>')
        o.append(f'<text x="{x:.1f}" y="{top + ph + 19}" text-anchor="middle">{t:g}</text>')
    o.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="black"/>')
    o.append(f'<text x="{left + pw / 2}" y="{H - 12}" text-anchor="middle">step (mini-batch)</text>')
    o.append(f'<text transform="translate(18,{top + ph / 2}) rotate(-90)" text-anchor="middle">'
             f'training loss (moving mean of {width} steps)</text>')
    for i, (r, c) in enumerate(curves):
        colour, dash = COLOURS[r["strategy"]], DASHES.get(r["stages"], "2,2")
        # single underneath, wide and light: gpipe (same updates) lies on it and must stay visible
        stroke = 'stroke-width="4" stroke-opacity="0.35"' if r["strategy"] == "single" else 'stroke-width="1.4"'
        pts = " ".join(f"{sx(s + 1):.1f},{sy(v):.1f}" for s, v in enumerate(c))
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        if pts:
            o.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" {stroke}{dash_attr} clip-path="url(#plot)"/>')
        ly = top + 10 + 18 * i
        label = "single" if r["strategy"] == "single" else f'{r["strategy"]} N={r["stages"]}'
        if len(c) < len(r["losses"]):
            label += f" (NaN at step {len(c) + 1})"
        legend_stroke = stroke if r["strategy"] == "single" else 'stroke-width="2"'
        o.append(f'<line x1="{left + pw + 12}" y1="{ly}" x2="{left + pw + 36}" y2="{ly}" stroke="{colour}" '
                 f'{legend_stroke}{dash_attr}/>')
        o.append(f'<text x="{left + pw + 40}" y="{ly + 4}" font-size="11">{label}</text>')
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


# --------------------------------------------------------------------------------------------------
# Tables. A "group" is one strategy and N run once per seed (--seeds): its numbers are shown as mean ± sd over
# the seeds, and with one seed exactly as that run's numbers.

def mean_sd(values, spec):
    """Per-seed values -> "mean ± sd" (sample sd); one seed: fmt() of its value. NaN, inf and None (a diverged or
    failed seed, a point it did not reach) are left out, and "(k/n)" then says how many seeds were counted."""
    if len(values) == 1:
        return fmt(values[0], spec)
    ok = [v for v in values if v is not None and math.isfinite(v)]
    if not ok:
        return "n/a"
    text = format(statistics.mean(ok), spec) + (" ± " + format(statistics.stdev(ok), spec) if len(ok) > 1 else "")
    return text + (f" ({len(ok)}/{len(values)})" if len(ok) < len(values) else "")


def column(group, key, spec):
    return mean_sd([r[key] for r in group], spec)


def pred_error(r):
    """SpecTrain's prediction error averaged over the stages that predict; NaN when none does."""
    errors = [s["pred_error"] for s in r["stage_rows"] if not math.isnan(s["pred_error"])]
    return sum(errors) / len(errors) if errors else float("nan")


def stage_summary(group):
    """(mean staleness "F / B" over the stages, SpecTrain's mean prediction error or "") of a group. The staleness
    is the first seed's (the schedule fixes it, the seed does not); the prediction error is mean ± sd."""
    first = next((r for r in group if r["stage_rows"]), group[0])
    stale = "0 / 0"
    if first["stage_rows"]:
        n = len(first["stage_rows"])
        stale = (f'{sum(s["stale_f"] for s in first["stage_rows"]) / n:.2f} / '
                 f'{sum(s["stale_b"] for s in first["stage_rows"]) / n:.2f}')
    errors = [pred_error(r) for r in group]
    return stale, "" if all(math.isnan(e) for e in errors) else mean_sd(errors, ".3f")


# What the staleness and prediction-error columns of the convergence tables mean.
STAGE_COLUMNS_NOTE = ("Staleness: mean version gap (forward / backward) over the stages, against W_i (spectrain: "
                      "against its predicted version). Pred. error: SpecTrain's ‖Ŵ − W_t‖ / ‖W − W_t‖ (t: the version the pass aimed at, W: the weights it would read without prediction) "
                      "averaged over the stages that predict.")

# Added to the tables' notes when there are several seeds.
SEEDS_NOTE = ("Several seeds: mean ± sd (sample standard deviation) of the seeds' values, (k/n): only k of the n "
              "seeds had a finite value (the others diverged or failed); staleness from the first seed; "
              "diverged k/n: the loss became NaN or infinite in k of the n seeds (at those steps).")


def first_bad_step(result):
    """The first step whose loss is NaN or infinite (counted from 1), or where onnxtrain stopped on one; None
    when none is."""
    bad = (i + 1 for i, x in enumerate(result["losses"]) if math.isnan(x) or math.isinf(x))
    return next(bad, result.get("diverged_step"))


def diverged_at(group):
    """One seed: "step K" for its first NaN or infinite loss, "-" when none is. Several: "diverged k/n (steps
    a, b)" over the seeds that diverged, "-" when none did."""
    bad = [s for s in (first_bad_step(r) for r in group) if s]
    if len(group) == 1:
        return f"step {bad[0]}" if bad else "-"
    if not bad:
        return "-"
    return f"diverged {len(bad)}/{len(group)} (step{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad))})"


def strategy_cell(group):
    """The strategy column: M for the flushing ones, and how many seeds failed (exit status not 0)."""
    r = group[0]
    text = r["strategy"] + (f" (M={r['micro_batches']})" if r["strategy"] in MICRO_BATCHED else "")
    failed = [x for x in group if x["rc"] != 0 and "diverged_step" not in x]  # the divergence guard's exit 1
    if failed:
        count = f" {len(failed)}/{len(group)}" if len(group) > 1 else ""
        text += f" **failed{count} (exit {failed[0]['rc']})**"
    return text


def failures(groups):
    """The command and error of every failed run, under the table."""
    lines = []
    for r in (r for g in groups for r in g if r["rc"] != 0):
        lines += ["", f"{r['tag']} failed: `{r['cmd']}`", "```", r.get("error", ""), "```"]
    return lines


def convergence_table(name, model, groups, steps, width, single_threads):
    single_note = f" (single: OMP_NUM_THREADS={single_threads})" if single_threads else ""
    seeds_note = " " + SEEDS_NOTE if groups and len(groups[0]) > 1 else ""
    points = [max(1, round(steps * p)) for p in (0.25, 0.5, 1.0)]
    lines = [f"### {name}: {model['describe']}, {steps} steps",
             "",
             f"Loss at step s: mean training loss over steps s-{width - 1}..s (n/a: the loss became NaN; diverged at: "
             "the first such step). " + STAGE_COLUMNS_NOTE + seeds_note,
             "",
             "| strategy | N | test acc. % | test loss | " + " | ".join(f"loss @{p}" for p in points) +
             " | diverged at | staleness F / B | pred. error | samples/s" + single_note + " | wall s |",
             "|---|---|---|---|" + "---|" * len(points) + "---|---|---|---|---|"]
    for g in groups:
        stale, pred = stage_summary(g)
        losses = [mean_sd([window_mean(r["losses"], p, width) if len(r["losses"]) >= p else float("nan") for r in g],
                          ".4f") for p in points]
        lines.append(f"| {strategy_cell(g)} | {g[0]['stages']} | {column(g, 'accuracy', '.2f')} | "
                     f"{column(g, 'test_loss', '.4f')} | " + " | ".join(losses) + f" | {diverged_at(g)} | {stale} | "
                     f"{pred} | {column(g, 'samples_per_s', '.0f')} | {column(g, 'wall_s', '.1f')} |")
    return lines + failures(groups)


def strategy_label(r):
    return "single" if r["strategy"] == "single" else (
        f'{r["strategy"]} N={r["stages"]}' + (f' M={r["micro_batches"]}' if r["strategy"] in MICRO_BATCHED else ""))


def lm_table(name, model, groups, single_threads):
    """The language model's table: validation perplexity after epochs 1, 5 and the last, the final training
    loss (mean over the last tenth of the steps), staleness and SpecTrain's prediction error."""
    epochs = model["epochs"]
    points = sorted({p for p in (1, 5, epochs) if p <= epochs})
    steps = max((len(r["losses"]) for g in groups for r in g), default=0)
    width = max(1, steps // 10)
    single_note = f" (single: OMP_NUM_THREADS={single_threads})" if single_threads else ""
    seeds_note = " " + SEEDS_NOTE if groups and len(groups[0]) > 1 else ""
    lines = [f"### {name}: {model['describe']}; {epochs} epoch{'s' if epochs != 1 else ''}, {steps} steps",
             "",
             f"Validation perplexity: exp of the mean cross-entropy per token over the held-out windows after that "
             f"epoch (inf or n/a: diverged, or the run stopped before it). Final loss: mean training loss over the "
             f"last {width} steps ({steps - width + 1}..{steps}; n/a: the loss became NaN, diverged at: the first "
             "such step). " + STAGE_COLUMNS_NOTE + seeds_note,
             "",
             "| strategy | N | " + " | ".join(f"val. ppl epoch {p}" for p in points) +
             " | final loss | diverged at | staleness F / B | pred. error | samples/s" + single_note + " | wall s |",
             "|---|---|" + "---|" * len(points) + "---|---|---|---|---|---|"]
    for g in groups:
        stale, pred = stage_summary(g)
        by_epoch = [{v["epoch"]: v["perplexity"] for v in r["val"]} for r in g]
        ppl = [mean_sd([e.get(p) for e in by_epoch], ".2f") for p in points]
        final = mean_sd([window_mean(r["losses"], len(r["losses"]), width) if r["losses"] else float("nan")
                         for r in g], ".4f")
        lines.append(f"| {strategy_cell(g)} | {g[0]['stages']} | " + " | ".join(ppl) + f" | {final} | "
                     f"{diverged_at(g)} | {stale} | {pred} | {column(g, 'samples_per_s', '.0f')} | "
                     f"{column(g, 'wall_s', '.1f')} |")
    return lines + failures(groups)


def summary_cell(group):
    """The final test accuracy's mean over the seeds, or how many seeds diverged (or failed)."""
    diverged = sum(1 for r in group if first_bad_step(r))
    if diverged:
        return f"diverged {diverged}/{len(group)}"
    failed = sum(1 for r in group if r["rc"] != 0)
    if failed:
        return f"failed {failed}/{len(group)}"
    accuracies = [r["accuracy"] for r in group if math.isfinite(r["accuracy"])]
    return format(statistics.mean(accuracies), ".2f") if accuracies else "n/a"


def divergence_summary(summary, seeds):
    """summary: model family -> [(config, table name, groups)] in the order run. Per family, a table of strategy
    and N against every (optimizer, lr): where each strategy stops converging as the learning rate grows."""
    if not summary:
        return []
    lines = ["", "## Divergence by learning rate", "",
             f"Final test accuracy % ({'mean over ' if len(seeds) > 1 else ''}{seeds_text(seeds)}) of each strategy "
             "at each optimizer and learning rate, everything else as in that column's table above; diverged k/n: "
             "the training loss became NaN or infinite in k of the n seeds; failed k/n: k runs exited with an error."]
    for family, configs in summary.items():
        rows = {}  # strategy label -> {column: cell}, in the order the runs were made
        for config, table, groups in configs:
            for g in groups:
                rows.setdefault(strategy_label(g[0]), {})[table] = summary_cell(g)
        lines += ["", f"### {family}", "",
                  "| strategy | " + " | ".join(f"{config} (`{table}`)" for config, table, _ in configs) + " |",
                  "|---|" + "---|" * len(configs)]
        lines += [f"| {label} | " + " | ".join(cells.get(table, "-") for _, table, _ in configs) + " |"
                  for label, cells in rows.items()]
    return lines


def plot_lm(args, key, model, results):
    """Writes OUT/convergence_KEY_curves.json and draws OUT/convergence_KEY_perplexity.png from it with
    tools/plot_convergence.py under --plot-python (matplotlib). Returns the report's lines."""
    curves = {"title": f"{key}: validation perplexity, {model['describe_short']}",
              "curves": [{"label": strategy_label(r), "strategy": r["strategy"], "stages": r["stages"],
                          "colour": COLOURS[r["strategy"]], "underlay": r["strategy"] == "single",
                          "epochs": [v["epoch"] for v in r["val"]],
                          "val_perplexity": [None if math.isnan(v["perplexity"]) or math.isinf(v["perplexity"])
                                             else v["perplexity"] for v in r["val"]]}
                         for r in results if r["val"]]}
    data = os.path.join(args.out, f"convergence_{key}_curves.json")
    png = os.path.join(args.out, f"convergence_{key}_perplexity.png")
    with open(data, "w") as f:
        json.dump(curves, f, indent=1)
    try:
        proc = subprocess.run([args.plot_python, PLOT_CONVERGENCE, data, png], capture_output=True, text=True)
    except OSError as e:
        proc = subprocess.CompletedProcess([], 127, "", str(e))
    if proc.returncode != 0 or not os.path.exists(png):
        note = (proc.stderr or proc.stdout).strip()
        print(f"  perplexity figure not drawn ({args.plot_python} {PLOT_CONVERGENCE}): {note}", flush=True)
        return ["", f"Validation perplexity curves: `{data}` (figure not drawn: {note})"]
    return ["", f"Validation perplexity against epoch: `{png}` (curves: `{data}`)"]


def throughput_table(name, groups):
    """groups: per configuration, its repeated runs. The median run by samples/s is shown, with the range."""
    def median(runs):
        ok = sorted((r for r in runs if r["rc"] == 0), key=lambda r: r["samples_per_s"])
        return ok[len(ok) // 2] if ok else runs[0]
    base = next((median(g) for g in groups if g[0]["threads_label"] == "default" and g[0]["strategy"] == "single"), None)
    lines = [f"### {name}: 2 stages against single",
             "",
             "Median of the repeats by samples/s (range in brackets); cores used: the run's user+system CPU time "
             "over its wall time (the whole process: data loading included); bubble: the stage's idle fraction.",
             "",
             "| run | samples/s | ratio to single (2 threads) | ratio to single (1 thread) | bubble per stage | "
             "stage nodes | cores used |",
             "|---|---|---|---|---|---|---|"]
    one = next((median(g) for g in groups if g[0]["threads_label"] == "1"), None)
    for g in groups:
        r = median(g)
        rates = [x["samples_per_s"] for x in g if x["rc"] == 0]
        spread = f" [{min(rates):.0f}–{max(rates):.0f}]" if len(rates) > 1 else ""
        ratios = []
        for b in (base, one):
            ok = b and b["samples_per_s"] > 0 and r["rc"] == 0
            ratios.append(fmt(r["samples_per_s"] / b["samples_per_s"], ".2f") if ok else "n/a")
        bubbles = ", ".join(f'{s["bubble"]:.1f}%' for s in r["stage_rows"]) or "-"
        nodes = ", ".join(s["nodes"] for s in r["stage_rows"]) or "all"
        label = r["label"] + (f" **failed (exit {r['rc']})**" if r["rc"] != 0 else "")
        lines.append(f"| {label} | {fmt(r['samples_per_s'], '.0f')}{spread} | {ratios[0]} | {ratios[1]} | {bubbles} | "
                     f"{nodes} | {r['cpu_s'] / max(r['wall_s'], 1e-9):.2f} |")
    for g in groups:
        for r in g:
            if r["rc"] != 0:
                lines += ["", f"{r['label']} failed: `{r['cmd']}`", "```", r.get("error", ""), "```"]
    return lines


def seed_runs(args, key, model, strategy, n, t_start, what):
    """A group: the runs of one strategy over n stages, one per seed of --seeds, tagged KEY_STRATEGY_nN (with
    _sSEED when there are several seeds); what: the run's length, for the progress line."""
    env = {"OMP_NUM_THREADS": str(args.single_threads)} if strategy == "single" and args.single_threads else None
    group = []
    for seed in args.seeds:
        wait_for_load(args.max_load, args.max_wait)
        tag = f"{key}_{strategy}_n{n}" + (f"_s{seed}" if len(args.seeds) > 1 else "")
        print(f"[{time.time() - t_start:6.0f} s] {tag} ({what}), load {os.getloadavg()[0]:.2f}", flush=True)
        r = run_onnxtrain(args, model, strategy, n, model["steps"], model["test"], tag, env, seed)
        r["micro_batches"] = args.micro_batches
        if r["rc"] != 0:
            print(f"  FAILED (exit {r['rc']}):\n{r.get('error', '')}", flush=True)
        group.append(r)
    return group


def figure_seed_note(args):
    """The figures draw each strategy's first seed only (several seeds' lines would hide each other)."""
    return f" (seed {args.seeds[0]} only)" if len(args.seeds) > 1 else ""


def convergence_study(args, key, model, strategies, stage_counts, t_start):
    """An image model: single and every strategy over each of stage_counts stages, a group of runs (one per
    seed) each. Returns (the report's lines: table and figure, the groups)."""
    runs = [("single", 1)] if "single" in strategies else []
    runs += [(s, n) for n in stage_counts for s in strategies if s != "single"]
    groups = [seed_runs(args, key, model, s, n, t_start, f"{model['steps']} steps") for s, n in runs]
    width = max(1, model["steps"] // 10)
    lines = [""] + convergence_table(key, model, groups, model["steps"], width, args.single_threads)
    svg = os.path.join(args.out, f"convergence_{key}.svg")
    write_svg(svg, f"{key}: training loss, {model['steps']} steps", [g[0] for g in groups], model["steps"],
              max(1, model["steps"] // 40))
    return lines + ["", f"Loss curves{figure_seed_note(args)}: `{svg}`"], groups


def lm_study(args, key, model, strategies, t_start):
    """The language model: single and every pipeline strategy over model["stages"] stages, epochs with
    validation, a group of runs (one per seed) each. Returns the report's lines (table and figure)."""
    runs = [("single", 1)] if "single" in strategies else []
    runs += [(s, model["stages"]) for s in strategies if s != "single"]
    limit = f", at most {model['steps']} steps an epoch" if model["steps"] else ""
    groups = [seed_runs(args, key, model, s, n, t_start, f"{model['epochs']} epoch(s){limit}") for s, n in runs]
    figure = plot_lm(args, key, model, [g[0] for g in groups])
    figure[-1] += figure_seed_note(args)
    return [""] + lm_table(key, model, groups, args.single_threads) + figure


def sweep(prefix, optimizers, lrs, default_optimizer):
    """(table name, lr, optimizer) for every optimizer and learning rate (comma-separated), optimizer outermost:
    PREFIX for the first, then PREFIX_lrLR, with _OPTIMIZER unless it is default_optimizer (names unique since
    the pairs are made unique)."""
    pairs = dict.fromkeys((float(lr), opt) for opt in optimizers.split(",") if opt for lr in lrs.split(",") if lr)
    return [(prefix if i == 0 else f"{prefix}_lr{lr:g}" + ("" if opt == default_optimizer else f"_{opt}"), lr, opt)
            for i, (lr, opt) in enumerate(pairs)]


def optimizer_text(opt):
    """The optimizer in a table's description: momentum and nesterov with their momentum (onnxtrain's default)."""
    return {"momentum": "momentum 0.9", "nesterov": "nesterov (momentum 0.9)"}.get(opt, opt)


def wait_for_load(limit, max_wait):
    if limit <= 0:
        return
    start = time.time()
    while os.getloadavg()[0] > limit and time.time() - start < max_wait:
        print(f"  load {os.getloadavg()[0]:.2f} > {limit}: waiting", flush=True)
        time.sleep(15)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--onnxtrain", default=None,
                   help="the binary (default: build/tools/onnxtrain, else build/release/tools/onnxtrain)")
    p.add_argument("--out", default=os.path.join(REPO, "build", "study"))
    p.add_argument("--cache", default="/tmp/onnxtrain-study", help="where the 3x32x32 Fashion-MNIST .npz is written once")
    p.add_argument("--models", default="cnn,resnet", help="comma-separated: cnn, resnet, gpt (the language model)")
    p.add_argument("--stages", default="4,8", help="pipeline stage counts of the convergence study")
    p.add_argument("--strategies", default=",".join(STRATEGIES))
    p.add_argument("--micro-batches", type=int, default=4, help="gpipe's M")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", default=None,
                   help="comma-separated: every convergence run once per seed, the tables give mean ± sd over them "
                        "and how many diverged (default: --seed alone; the throughput runs use the first)")
    p.add_argument("--cnn-steps", type=int, default=1875, help="CNN steps (1875: one epoch of batch 32)")
    p.add_argument("--cnn-lr", default="0.04,0.01", help="comma-separated: a convergence table per learning rate")
    p.add_argument("--cnn-optimizers", default="nesterov",
                   help="comma-separated (nesterov, momentum, adamw, ...): a table per optimizer and learning rate, "
                        "everything else equal")
    p.add_argument("--resnet-steps", type=int, default=250)
    p.add_argument("--single-threads", type=int, default=1,
                   help="OMP_NUM_THREADS of the convergence part's single runs (0: leave it; losses do not depend "
                        "on it, and 2 OpenMP threads on a busy 2-core machine can be ~10-40x slower, which would "
                        "blow the time budget; the throughput part measures both)")
    p.add_argument("--resnet-lr", default="0.05,0.01", help="comma-separated: a convergence table per learning rate")
    p.add_argument("--resnet-optimizers", default="momentum",
                   help="comma-separated: a table per optimizer and learning rate, as --cnn-optimizers")
    p.add_argument("--resnet-test-rows", type=int, default=2000,
                   help="ResNet test pass on the first K test images (0: all 10000)")
    p.add_argument("--gpt-epochs", type=int, default=10, help="GPT-2 epochs (495 training windows of batch 16: 31 steps each, 10 is 310 steps)")
    p.add_argument("--gpt-stages", type=int, default=4, help="GPT-2 pipeline stages")
    p.add_argument("--gpt-limit-batches", type=int, default=0,
                   help="GPT-2: stop each epoch after K steps (onnxtrain's --limit-batches; quick tests; 0: all)")
    p.add_argument("--gpt-lr", type=float, default=0.003)
    p.add_argument("--gpt-text", default=GPT_TEXT, help="GPT-2 training text (its bytes are the tokens)")
    p.add_argument("--plot-python", default="/usr/bin/python3",
                   help="the Python with matplotlib that draws the GPT-2 perplexity figure (tools/plot_convergence.py)")
    p.add_argument("--throughput", choices=["on", "off", "only"], default="on")
    p.add_argument("--throughput-cnn-steps", type=int, default=600)
    p.add_argument("--throughput-resnet-steps", type=int, default=60)
    p.add_argument("--throughput-repeats", type=int, default=3, help="runs per throughput configuration (median shown)")
    p.add_argument("--max-load", type=float, default=0.0,
                   help="before each run wait (up to --max-wait s) until the 1-minute load average is below this")
    p.add_argument("--max-wait", type=float, default=120)
    args = p.parse_args()
    if args.onnxtrain is None:
        args.onnxtrain = os.path.join(REPO, "build", "tools", "onnxtrain")
        release = os.path.join(REPO, "build", "release", "tools", "onnxtrain")
        if not os.access(args.onnxtrain, os.X_OK) and os.access(release, os.X_OK):
            args.onnxtrain = release
    args.seeds = list(dict.fromkeys(int(x) for x in args.seeds.split(",") if x)) if args.seeds else [args.seed]
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    if not os.access(args.onnxtrain, os.X_OK):
        raise SystemExit(f"{args.onnxtrain}: no onnxtrain binary (build it, or pass --onnxtrain)")

    load_start = os.getloadavg()
    t_start = time.time()
    models = {}
    wanted = args.models.split(",")
    if "cnn" in wanted:
        # One convergence table per learning rate (the first also gets the throughput part): the quick start's
        # 0.04 is too large for the stale 1F1B strategies, a smaller one shows how they compare when they converge.
        # --cnn-optimizers nesterov,momentum: the same runs with only the optimizer changed (an ablation).
        for i, (name, lr, opt) in enumerate(sweep("cnn", args.cnn_optimizers, args.cnn_lr, "nesterov")):
            models[name] = {
                "path": os.path.join(REPO, "models", "cnn_opset17.onnx"), "batch": 32, "lr": lr,
                "optimizer": opt, "schedule": "cosine", "data": ["--data", "fashion-mnist"], "test": [],
                "steps": args.cnn_steps, "tp_steps": args.throughput_cnn_steps if i == 0 else 0,
                "family": "cnn", "config": f"{opt} lr {lr:g}",
                "describe": f"Fashion-MNIST CNN (cnn_opset17.onnx), batch 32, {optimizer_text(opt)} lr {lr:g} "
                            f"cosine, {seeds_text(args.seeds)}; test on the 10000 test images"}
    if "resnet" in wanted:
        train_npz, test_npz = fashion_npz(args.cache, args.resnet_test_rows)
        test_what = f"the first {args.resnet_test_rows} test images" if args.resnet_test_rows else "the 10000 test images"
        for i, (name, lr, opt) in enumerate(sweep("resnet", args.resnet_optimizers, args.resnet_lr, "momentum")):
            models[name] = {
                "path": os.path.join(REPO, "models", "resnet_opset17.onnx"), "batch": 32, "lr": lr,
                "optimizer": opt, "schedule": "constant",
                "data": ["--data", "npz:" + train_npz], "test": ["--test-data", "npz:" + test_npz],
                "steps": args.resnet_steps, "tp_steps": args.throughput_resnet_steps if i == 0 else 0,
                "family": "resnet", "config": f"{opt} lr {lr:g}",
                "describe": f"small ResNet (resnet_opset17.onnx) on Fashion-MNIST padded to 3x32x32, batch 32, "
                            f"{optimizer_text(opt)} lr {lr:g} constant, {seeds_text(args.seeds)}; test on {test_what}"}

    if "gpt" in wanted:
        limit = f", at most {args.gpt_limit_batches} steps an epoch" if args.gpt_limit_batches else ""
        models["gpt"] = {
            "kind": "lm", "path": os.path.join(REPO, "models", "transformers", "gpt2_torchscript.onnx"),
            "batch": 16, "lr": args.gpt_lr, "optimizer": "adamw", "schedule": "cosine",
            "epochs": args.gpt_epochs, "validation": 0.1, "stages": args.gpt_stages,
            "data": ["--data", "text:" + args.gpt_text, "--seq-len", "64"], "test": ["--test-data", "none"],
            "steps": args.gpt_limit_batches, "tp_steps": 0,
            "describe": f"2-layer GPT-2 (transformers/gpt2_torchscript.onnx, hidden 64, vocab 256) on the bytes of "
                        f"{args.gpt_text} in windows of 64 (the last 10% held out for validation), batch 16, "
                        f"adamw lr {args.gpt_lr:g} cosine, {seeds_text(args.seeds)}{limit}",
            "describe_short": f"GPT-2 on {os.path.basename(args.gpt_text)}, batch 16, adamw lr {args.gpt_lr:g} cosine"}

    report = ["# onnxtrain pipeline strategies: convergence and throughput", "",
              f"Command: `{' '.join([os.path.basename(sys.executable)] + sys.argv)}`  ",
              f"Machine: {os.cpu_count()} CPUs; 1/5/15-minute load average at start "
              f"{load_start[0]:.2f} / {load_start[1]:.2f} / {load_start[2]:.2f}"]
    body = []
    stage_counts = [int(s) for s in args.stages.split(",") if s]
    summary = {}  # model family -> [(optimizer and lr, table name, groups)]: the divergence summary
    strategies = args.strategies.split(",")
    for key, model in models.items():
        if model.get("kind") == "lm":
            if args.throughput != "only":
                body += lm_study(args, key, model, strategies, t_start)
            continue
        if args.throughput != "only":
            lines, groups = convergence_study(args, key, model, strategies, stage_counts, t_start)
            body += lines
            summary.setdefault(model["family"], []).append((model["config"], key, groups))
        if args.throughput != "off" and model["tp_steps"]:
            tp = []
            for label, strategy, n, env, threads_label in (
                    ("single (2 OpenMP threads, the default)", "single", 1, None, "default"),
                    ("single, OMP_NUM_THREADS=1", "single", 1, {"OMP_NUM_THREADS": "1"}, "1"),
                    ("pipedream N=2 (1 thread per stage)", "pipedream", 2, None, "default"),
                    (f"gpipe N=2 M={args.micro_batches} (1 thread per stage)", "gpipe", 2, None, "default")):
                group = []
                for rep in range(args.throughput_repeats):
                    wait_for_load(args.max_load, args.max_wait)
                    tag = f"{key}_tp_{strategy}_n{n}" + ("_omp1" if threads_label == "1" else "") + f"_r{rep}"
                    print(f"[{time.time() - t_start:6.0f} s] {tag} ({model['tp_steps']} steps), "
                          f"load {os.getloadavg()[0]:.2f}", flush=True)
                    r = run_onnxtrain(args, model, strategy, n, model["tp_steps"], ["--test-data", "none"], tag, env)
                    r["label"], r["threads_label"] = label, threads_label
                    group.append(r)
                tp.append(group)
            # The cost model's view of the same 2-stage split: predicted stage times, imbalance, speed-up.
            # --split: the cut train planned (its nominal CPU), evaluated with this machine's measured rates.
            rows = next((r["stage_rows"] for g in tp for r in g if r["strategy"] == "pipedream" and r["stage_rows"]), [])
            split = ["--split", rows[1]["nodes"].strip("[").split(",")[0]] if len(rows) == 2 else []
            plan_cmd = [args.onnxtrain, "partition", model["path"], "--stages", "2", "--batch", str(model["batch"])] + split
            plan = subprocess.run(plan_cmd, capture_output=True, text=True)
            body += ["", f"{key}: {model['tp_steps']} steps per run, {args.throughput_repeats} repeats, no test pass"]
            body += throughput_table(key, tp)
            body += ["", f"`onnxtrain partition {os.path.relpath(model['path'], REPO)} {' '.join(plan_cmd[3:])}` "
                     "(the cost model's prediction for the same split):", "```", (plan.stdout + plan.stderr).strip(), "```"]
    body += divergence_summary(summary, args.seeds)
    load_end = os.getloadavg()
    report[-1] += (f", at end {load_end[0]:.2f} / {load_end[1]:.2f} / {load_end[2]:.2f}; "
                   f"study took {time.time() - t_start:.0f} s")
    text = "\n".join(report + body) + "\n"
    with open(os.path.join(args.out, "convergence.md"), "w") as f:
        f.write(text)
    print()
    print(text)


if __name__ == "__main__":
    main()
