#!/usr/bin/python3
"""Training speed of onnxtrain against PyTorch eager on the CPU for Hugging Face transformer language
models, side by side: samples/s and tokens/s of one full training step (forward, cross-entropy, backward,
AdamW update) of the same model, initial weights, batch and thread count.

Models (transformers, built after torch.manual_seed(0), every dropout 0, eager attention; input
`input_ids` int64 (batch, SEQ), output `logits`):

  gpt2  GPT2LMHeadModel, 4 layers, hidden 256, 4 heads, sequence 128, vocab 50257 (GPT-2's); loss: mean
        cross-entropy of the (N,T,V) logits against next-token labels (N,T)
  bert  BertForSequenceClassification, 4 layers, hidden 256, 4 heads, intermediate 1024, vocab 30522,
        sequence 128, 10 labels, input_ids only; loss: mean cross-entropy of the (N,10) logits

--quick makes both tiny (2 layers, hidden 64, sequence 32, vocab 1000) to check the script end to end.

This script exports each model itself (the torch interpreter, --python, run as a helper): the TorchScript
exporter, opset 17, TrainingMode.TRAINING, no constant folding, dynamic batch only, with the aten::diff
and aten::cumsum symbolics of models/make_transformers.py; the module's state_dict is saved next to the
ONNX file and checked against its initializers (every initializer `hf.X` equals parameter or buffer X bit
for bit), so both sides start from the same weights. The exports are kept in --export-dir (default
build/compare_pytorch_transformers/) and reused while the model's configuration is unchanged.

onnxtrain: `OMP_NUM_THREADS=T onnxtrain train MODEL --data npz:FILE --batch B --optimizer adamw --lr 1e-4
--weight-decay 0.01 --limit-batches K --epochs 1 --validation 0 --test-data none --metrics M.jsonl`, FILE
an npz of random `input_ids` (N,SEQ) and `labels` ((N,SEQ) next tokens for gpt2, (N,) classes for bert),
N = B*K; the per-step times come from the metrics file, whose samples_per_s is cumulative from the first
step, so step k ended at k*B / samples_per_s_k.
PyTorch (eager): the same module class with the saved state_dict, torch.set_num_threads(T), train mode,
torch.optim.AdamW(lr 1e-4, weight_decay 0.01 -- torch's default, passed to onnxtrain too, whose default is
0), the batches of the same npz in order, loss.item() every step.
Each side discards --warmup steps, then times --steps steps; a repeat is one such block (for onnxtrain one
process, since its first step prepares the kernels; for torch one command to a worker process that keeps
the model). The two sides alternate repeat by repeat, so load from other processes hits both alike. The
table gives the median of the repeats and, in brackets, their min-max; tokens/s = samples/s * SEQ.

    benchmarks/compare_pytorch_transformers.py                    # gpt2 and bert, batch 8, 1 and 2 threads
    benchmarks/compare_pytorch_transformers.py --quick --repeats 1 --steps 3   # tiny models: a smoke test
    benchmarks/compare_pytorch_transformers.py --models gpt2 --threads 1 --repeats 5 --batch 16
    benchmarks/compare_pytorch_transformers.py --wait-idle 60    # on a shared machine: time only when it is idle
    benchmarks/compare_pytorch_transformers.py --build build/release --json /tmp/tf.json

This script itself needs only the standard library; its helpers (this file run with --prepare or
--torch-worker by --python, default /work/venv/torchnew/bin/python) need torch, transformers, onnx and numpy.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
from onnxtrain_binary import find_onnxtrain  # noqa: E402
sys.path.insert(0, HERE)
from compare_pytorch import WorkerProcess, print_markdown_table, timed_train_run, wait_for_idle  # noqa: E402
MODELS = os.path.join(ROOT, "models")
DEFAULT_PYTHON = "/work/venv/torchnew/bin/python"
DEFAULT_EXPORT_DIR = os.path.join(ROOT, "build", "compare_pytorch_transformers")
LR, WEIGHT_DECAY = 1e-4, 0.01
NUM_LABELS = 10
OPSET = 17
# Model sizes: the defaults, and --quick.
FULL = {"gpt2": dict(layers=4, hidden=256, heads=4, inner=1024, seq=128, vocab=50257),
        "bert": dict(layers=4, hidden=256, heads=4, inner=1024, seq=128, vocab=30522)}
QUICK = {name: dict(layers=2, hidden=64, heads=4, inner=256, seq=32, vocab=1000) for name in FULL}
# Timed steps per repeat: about 25 s of work per side at one thread on a small 2-core machine
# (gpt2 ~5 s a step, bert ~1.1 s).
DEFAULT_STEPS = {"gpt2": 5, "bert": 20}
QUICK_STEPS = {"gpt2": 20, "bert": 20}


def sizes(name, quick):
    return (QUICK if quick else FULL)[name]


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().strip()


# ----------------------------------------------------------------------------------------------------
# torch helpers (run by --python): the models, their export, the data
# ----------------------------------------------------------------------------------------------------
def build_model(name, quick):
    """The wrapped Hugging Face model (forward(input_ids) -> logits), seed 0, train() state."""
    import torch
    sys.path.insert(0, MODELS)
    from make_transformers import TokenModel
    s = sizes(name, quick)
    torch.manual_seed(0)
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(vocab_size=s["vocab"], n_embd=s["hidden"], n_layer=s["layers"], n_head=s["heads"],
                         n_inner=s["inner"], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                         bos_token_id=s["vocab"] - 1, eos_token_id=s["vocab"] - 1, attn_implementation="eager")
        model = TokenModel(GPT2LMHeadModel(cfg), ["input_ids"], use_cache=True)
    else:
        from transformers import BertConfig, BertForSequenceClassification
        cfg = BertConfig(vocab_size=s["vocab"], hidden_size=s["hidden"], num_hidden_layers=s["layers"],
                         num_attention_heads=s["heads"], intermediate_size=s["inner"], num_labels=NUM_LABELS,
                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout=0.0,
                         attn_implementation="eager")
        model = TokenModel(BertForSequenceClassification(cfg), ["input_ids"], use_cache=False)
    model.train()
    return model


def export_paths(export_dir, name, quick):
    s = sizes(name, quick)
    stem = os.path.join(export_dir, "%s_L%d_H%d_T%d_V%d" % (name, s["layers"], s["hidden"], s["seq"], s["vocab"]))
    return stem + ".onnx", stem + ".pt", stem + ".json"


def export_model(name, quick, export_dir):
    """Exports the model (unless an export of the same configuration is there) and saves its state_dict;
    checks that every initializer hf.X equals state_dict entry X. Returns the ONNX path."""
    import warnings
    import numpy as np
    import onnx
    import torch
    import transformers
    from onnx import numpy_helper
    sys.path.insert(0, MODELS)
    from make_transformers import cumsum_symbolic, diff_symbolic

    onnx_file, state_file, info_file = export_paths(export_dir, name, quick)
    info = {"model": name, "sizes": sizes(name, quick), "opset": OPSET, "torch": torch.__version__,
            "transformers": transformers.__version__}
    if all(os.path.exists(p) for p in (onnx_file, state_file, info_file)):
        with open(info_file) as f:
            if json.load(f) == info:
                return onnx_file, "reused"
    os.makedirs(export_dir, exist_ok=True)
    model = build_model(name, quick)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    torch.manual_seed(1)
    example = torch.randint(0, sizes(name, quick)["vocab"], (2, sizes(name, quick)["seq"]), dtype=torch.int64)
    for op, fn in (("aten::diff", diff_symbolic), ("aten::cumsum", cumsum_symbolic)):
        torch.onnx.register_custom_op_symbolic(op, fn, OPSET)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (example,), onnx_file, dynamo=False, opset_version=OPSET,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["input_ids"], output_names=["logits"],
                          dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"}})
    m = onnx.load(onnx_file)
    checked = 0
    for t in m.graph.initializer:
        if not t.name.startswith("hf."):
            continue
        key = t.name[len("hf."):]
        if "hf." + key not in state:
            sys.exit("%s: initializer %s is no state_dict entry" % (onnx_file, t.name))
        value = numpy_helper.to_array(t)
        if not np.array_equal(value, state["hf." + key].numpy()):
            sys.exit("%s: initializer %s differs from the module's %s" % (onnx_file, t.name, key))
        checked += 1
    listed = {t.name for t in m.graph.initializer}
    # A tied weight (gpt2's lm_head = wte) is one parameter under either of its names.
    aliases = {}
    for k, v in model.state_dict(keep_vars=True).items():
        aliases.setdefault(v.data_ptr(), set()).add(k)
    missing = [k for k, v in model.named_parameters() if not aliases[v.data_ptr()] & listed]
    if missing:
        sys.exit("%s: parameters not among the initializers: %s" % (onnx_file, missing))
    torch.save(state, state_file)
    with open(info_file, "w") as f:
        json.dump(info, f)
    return onnx_file, "exported, %d initializers equal the state_dict" % checked


def write_data(name, quick, rows, path):
    """Random token ids (seed 0) and labels: next tokens (N,T) for gpt2, classes (N,) for bert."""
    import numpy as np
    s = sizes(name, quick)
    rng = np.random.default_rng(0)
    if name == "gpt2":
        tokens = rng.integers(0, s["vocab"], (rows, s["seq"] + 1), dtype=np.int64)
        ids, labels = tokens[:, :-1].copy(), tokens[:, 1:].copy()
    else:
        ids = rng.integers(0, s["vocab"], (rows, s["seq"]), dtype=np.int64)
        labels = rng.integers(0, NUM_LABELS, rows, dtype=np.int64)
    np.savez(path, input_ids=ids, labels=labels)


def prepare(name, quick, export_dir, rows, data):
    onnx_file, how = export_model(name, quick, export_dir)
    write_data(name, quick, rows, data)
    print(json.dumps({"onnx": onnx_file, "how": how}), flush=True)


def torch_worker(name, quick, batch, threads, export_dir, data):
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    if torch.get_num_threads() != threads:
        sys.exit("torch runs %d threads, not %d" % (torch.get_num_threads(), threads))
    model = build_model(name, quick)
    _, state_file, _ = export_paths(export_dir, name, quick)
    model.load_state_dict(torch.load(state_file), strict=True)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    arrays = np.load(data)
    xs, ys = torch.from_numpy(arrays["input_ids"]), torch.from_numpy(arrays["labels"])
    pool = xs.shape[0] // batch
    counter = [0]

    def step():
        i = counter[0] % pool
        counter[0] += 1
        x, y = xs[i * batch:(i + 1) * batch], ys[i * batch:(i + 1) * batch]
        optimizer.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        optimizer.step()
        return loss.item()  # the loss reaches the host every step, as onnxtrain's progress reads it

    print(json.dumps({"ready": True, "torch": torch.__version__, "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        for _ in range(command["warmup"]):
            step()
        start = time.perf_counter()
        for _ in range(command["steps"]):
            step()
        seconds = time.perf_counter() - start
        print(json.dumps({"samples_per_s": command["steps"] * batch / seconds}), flush=True)


class TorchWorker(WorkerProcess):
    def __init__(self, python, name, quick, batch, threads, export_dir, data):
        super().__init__([python, os.path.abspath(__file__), "--torch-worker", name, "--batch", str(batch), "--threads",
                          str(threads), "--export-dir", export_dir, "--data", data] + (["--quick"] if quick else []),
                         threads)


# ----------------------------------------------------------------------------------------------------
# onnxtrain side
# ----------------------------------------------------------------------------------------------------
def onnxtrain_repeat(binary, model, data, batch, threads, warmup, steps, workdir):
    """Samples/s over `steps` steps after `warmup` steps, in one fresh `onnxtrain train` process."""
    metrics = os.path.join(workdir, "metrics.jsonl")
    cmd = [binary, "train", model, "--data", "npz:" + data, "--batch", str(batch), "--optimizer", "adamw",
           "--lr", str(LR), "--weight-decay", str(WEIGHT_DECAY), "--limit-batches", str(warmup + steps), "--epochs", "1",
           "--validation", "0", "--test-data", "none", "--log-every", "1000000", "--metrics", metrics,
           "-o", os.path.join(workdir, "trained.onnx")]
    return timed_train_run(cmd, metrics, threads, batch, warmup, steps)


# ----------------------------------------------------------------------------------------------------
def fmt_rates(values, scale=1):
    values = [v * scale for v in values]
    return "%.1f [%.1f-%.1f]" % (statistics.median(values), min(values), max(values)) if scale == 1 else \
        "%.0f [%.0f-%.0f]" % (statistics.median(values), min(values), max(values))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="onnxtrain build folder (default build/)")
    p.add_argument("--binary", help="the onnxtrain executable to time, instead of the one under --build")
    p.add_argument("--python", default=DEFAULT_PYTHON, help="interpreter with torch and transformers (default %s)"
                   % DEFAULT_PYTHON)
    p.add_argument("--models", default="gpt2,bert", help="comma-separated, of gpt2, bert (default both)")
    p.add_argument("--batch", type=int, default=8, help="samples per step (default 8)")
    p.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--warmup", type=int, default=3, help="steps discarded before each timed block (default 3)")
    p.add_argument("--steps", type=int, default=0, help="timed steps per repeat (default per model: %s; --quick %s)"
                   % (DEFAULT_STEPS, QUICK_STEPS))
    p.add_argument("--quick", action="store_true", help="tiny models (2 layers, hidden 64, sequence 32, vocab 1000)")
    p.add_argument("--wait-idle", type=float, default=0, metavar="SECONDS",
                   help="before each timed block wait up to SECONDS for the CPUs to be idle (<10%% busy; shared "
                        "machines; default 0: do not wait)")
    p.add_argument("--export-dir", default=DEFAULT_EXPORT_DIR, help="where the exported models are kept (default "
                   "build/compare_pytorch_transformers/)")
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--torch-worker", help=argparse.SUPPRESS)
    p.add_argument("--prepare", help=argparse.SUPPRESS)
    p.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.prepare:
        prepare(args.prepare, args.quick, args.export_dir, args.rows, args.data)
        return
    if args.torch_worker:
        torch_worker(args.torch_worker, args.quick, args.batch, int(args.threads), args.export_dir, args.data)
        return

    started = time.time()
    binary = find_onnxtrain(os.path.abspath(args.build), args.binary)
    names = args.models.split(",")
    for name in names:
        if name not in FULL:
            sys.exit("unknown model %s (one of %s)" % (name, ", ".join(FULL)))
    threads_list = [int(t) for t in args.threads.split(",")]
    export_dir = os.path.abspath(args.export_dir)
    rows, torch_version = [], None
    print("onnxtrain: %s\ntorch: %s; batch %d, %d repeats, %d warm-up steps%s\n/proc/loadavg at the start: %s" %
          (binary, args.python, args.batch, args.repeats, args.warmup, "; --quick (tiny models)" if args.quick else "",
           loadavg()), flush=True)
    with tempfile.TemporaryDirectory(prefix="compare_pytorch_transformers_") as workdir:
        for name in names:
            seq = sizes(name, args.quick)["seq"]
            steps = args.steps or (QUICK_STEPS if args.quick else DEFAULT_STEPS)[name]
            data = os.path.join(workdir, name + "_data.npz")
            t0 = time.time()
            run = subprocess.run([args.python, os.path.abspath(__file__), "--prepare", name, "--export-dir", export_dir,
                                  "--rows", str(args.batch * (args.warmup + steps)), "--data", data] +
                                 (["--quick"] if args.quick else []), stdout=subprocess.PIPE, text=True)
            if run.returncode != 0:
                sys.exit("exporting %s failed (%d)" % (name, run.returncode))
            prepared = json.loads(run.stdout.strip().splitlines()[-1])
            print("  %s: %s (%s, %.0f s)" % (name, prepared["onnx"], prepared["how"], time.time() - t0), flush=True)
            for threads in threads_list:
                load = os.getloadavg()[0]
                worker = TorchWorker(args.python, name, args.quick, args.batch, threads, export_dir, data)
                torch_version = worker.info["torch"]
                ours, theirs = [], []
                busy_repeats = 0
                for _ in range(args.repeats):
                    if args.wait_idle and not wait_for_idle(args.wait_idle):
                        busy_repeats += 1
                    ours.append(onnxtrain_repeat(binary, prepared["onnx"], data, args.batch, threads, args.warmup,
                                                 steps, workdir))
                    if args.wait_idle and not wait_for_idle(args.wait_idle):
                        busy_repeats += 1
                    theirs.append(worker.ask(warmup=args.warmup, steps=steps)["samples_per_s"])
                worker.close()
                ratios = [a / b for a, b in zip(ours, theirs)]
                rows.append({"model": name, "batch": args.batch, "threads": threads, "seq": seq, "steps": steps,
                             "onnxtrain": ours, "torch": theirs,
                             "ratio": statistics.median(ours) / statistics.median(theirs),
                             "ratio_per_repeat": ratios, "load_at_start": load})
                print("  %s b%d t%d: onnxtrain %s, torch %s samples/s%s" %
                      (name, args.batch, threads, fmt_rates(ours), fmt_rates(theirs),
                       ", %d timed blocks started on a busy machine" % busy_repeats if busy_repeats else ""),
                      flush=True)

    print("\non cpu; torch %s eager (%s); median [min-max] of %d repeats of %s timed steps after %d warm-up; "
          "tokens/s = samples/s * sequence; ratio = onnxtrain / torch medians [min-max of the per-repeat ratios]; "
          "load = 1-minute load average as each row started; /proc/loadavg after: %s; %.0f s in all\n" %
          (torch_version, args.python, args.repeats, "/".join(str(r["steps"]) for r in rows[::len(threads_list)]),
           args.warmup, loadavg(), time.time() - started))
    header = ("model", "batch", "threads", "onnxtrain samples/s", "onnxtrain tokens/s", "torch samples/s",
              "torch tokens/s", "ratio", "load")
    lines = [header] + [(r["model"], str(r["batch"]), str(r["threads"]), fmt_rates(r["onnxtrain"]),
                         fmt_rates(r["onnxtrain"], r["seq"]), fmt_rates(r["torch"]), fmt_rates(r["torch"], r["seq"]),
                         "%.2f [%.2f-%.2f]" % (r["ratio"], min(r["ratio_per_repeat"]), max(r["ratio_per_repeat"])),
                         "%.2f" % r["load_at_start"])
                        for r in rows]
    print_markdown_table(lines)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch_version, "python": args.python, "onnxtrain": binary, "quick": args.quick,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
