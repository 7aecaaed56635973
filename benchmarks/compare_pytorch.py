#!/usr/bin/python3
"""Training speed of onnxtrain against PyTorch on the CPU, side by side: samples/s of one full training
step (forward, softmax cross-entropy, backward, momentum-SGD update; BatchNorm in training mode updating
its running statistics) of the same model, batch and thread count.

onnxtrain: `onnxtrain train MODEL --data synthetic:... --metrics FILE` (OMP_NUM_THREADS=T: oneDNN and
onnxtrain's own kernels both run on libgomp's threads); the per-step times come from the metrics file,
whose samples_per_s is cumulative from the first step, so step k ended at samples_k / samples_per_s_k.
PyTorch: the torch module of models/make_fixtures.py with the weights of the same ONNX file (as
models/expected/make_gradients.py loads them), torch.set_num_threads(T), torch.optim.SGD(lr 0.01,
momentum 0.9) -- what `onnxtrain train` does by default -- on random data. Each side discards warm-up
steps, then times a block of steps; a repeat is one such block (for onnxtrain one process, since its
first step prepares the kernels; for torch one command to a worker process that keeps the model).
The two sides alternate repeat by repeat, so load from other processes hits both alike. The table gives
the median of the repeats and, in brackets, their min-max.

    benchmarks/compare_pytorch.py                       # CNN b64 and ResNet b32, 1 and 2 threads
    benchmarks/compare_pytorch.py --build build/release --repeats 7 --threads 1
    benchmarks/compare_pytorch.py --wait-idle 60       # on a shared machine: time only when it is idle
    benchmarks/compare_pytorch.py --python /work/venv/torchnew/bin/python   # torch 2.x instead of 1.13
    benchmarks/compare_pytorch.py --profile --models resnet:32 --threads 1  # + per-op profiles of both
    benchmarks/compare_pytorch.py --device cuda --models resnet:64 --threads 1   # both on cuda:0 (gpu-check.sh)
    benchmarks/compare_pytorch.py --device cuda --tf32 ...   # both with TF32 tensor cores (default: neither)
    benchmarks/compare_pytorch.py --binary /tmp/onnxtrain-gpu-bundle/onnxtrain ...   # an executable outside a build

The default interpreter for torch is Debian's /usr/bin/python3 (torch 1.13), the one the fixture scripts
use. This script itself needs only the standard library; the worker (this file run with --torch-worker
by that interpreter) needs torch, onnx and numpy.
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
MODELS = os.path.join(ROOT, "models")
DEFAULT_PYTHON = "/usr/bin/python3"
LR, MOMENTUM = 0.01, 0.9
CLASSES = 10
# Timed steps per repeat: about a second of work at one thread on a small 2-core machine.
DEFAULT_STEPS = {"cnn": 100, "mlp": 200, "resnet": 25}


def input_dims(name):
    """(C, H, W) of the fixture's image input."""
    return {"cnn": (1, 28, 28), "mlp": (1, 28, 28), "resnet": (3, 32, 32)}[name]


def thread_env(threads):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    env["MKL_NUM_THREADS"] = str(threads)
    return env


def busy_fraction(interval=0.5):
    """Fraction of all CPUs' time spent busy over `interval` seconds (Linux /proc/stat)."""
    def sample():
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        return sum(fields), fields[3] + fields[4]  # total, idle + iowait
    total0, idle0 = sample()
    time.sleep(interval)
    total1, idle1 = sample()
    return 1.0 - (idle1 - idle0) / max(total1 - total0, 1)


def wait_for_idle(limit_s):
    """Waits (up to limit_s) until other processes leave the CPUs nearly idle; True when they did."""
    deadline = time.time() + limit_s
    while time.time() < deadline:
        if busy_fraction() < 0.1:
            return True
    return False


# ----------------------------------------------------------------------------------------------------
# onnxtrain side
# ----------------------------------------------------------------------------------------------------
def onnxtrain_repeat(binary, name, batch, threads, warmup, steps, workdir, device="cpu", tf32=False):
    """Samples/s over `steps` steps after `warmup` steps, in one fresh `onnxtrain train` process."""
    c, h, w = input_dims(name)
    total = warmup + steps
    metrics = os.path.join(workdir, "metrics.jsonl")
    cmd = [binary, "train", os.path.join(MODELS, name + "_opset17.onnx"),
           "--data", "synthetic:%d,%d,%d:%d:%d" % (c, h, w, CLASSES, batch * total),
           "--batch", str(batch), "--epochs", "1", "--validation", "0", "--lr", str(LR),
           "--optimizer", "momentum", "--momentum", str(MOMENTUM), "--log-every", "1000000",
           "--metrics", metrics, "--device", device, "-o", os.path.join(workdir, "trained.onnx")]
    cmd += ["--tf32"] if tf32 else []
    return timed_train_run(cmd, metrics, threads, batch, warmup, steps)


def timed_train_run(cmd, metrics, threads, batch, warmup, steps):
    """Runs the `onnxtrain train` command `cmd` (writing --metrics to `metrics`) with `threads` OpenMP threads;
    returns samples/s over the `steps` steps after `warmup` steps. The metrics' samples_per_s is cumulative
    from the first step, so step k ended at k * batch / samples_per_s_k."""
    if os.path.exists(metrics):
        os.remove(metrics)
    run = subprocess.run(cmd, env=thread_env(threads), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.exit("onnxtrain failed (%d): OMP_NUM_THREADS=%d %s\n%s" % (run.returncode, threads, " ".join(cmd), run.stderr))
    ends = {}  # step -> seconds from the start of step 1 to the end of that step
    with open(metrics) as f:
        for line in f:
            record = json.loads(line)
            if "step" in record:
                ends[record["step"]] = record["step"] * batch / record["samples_per_s"]
    total = warmup + steps
    if len(ends) != total:
        sys.exit("onnxtrain ran %d steps, expected %d: %s" % (len(ends), total, " ".join(cmd)))
    return steps * batch / (ends[total] - ends[warmup])


def onnxtrain_profile(onnxtrain, name, batch, threads, steps):
    """Per-op kernel times of the same step (benchmarks/training_step_profile.cc), when it is built in
    the same build folder as the onnxtrain binary."""
    binary = os.path.join(os.path.dirname(os.path.dirname(onnxtrain)), "benchmarks", "training_step_profile")
    if not os.access(binary, os.X_OK):
        print("(no %s: build the training_step_profile target for onnxtrain's per-op times)\n" % binary)
        return
    run = subprocess.run([binary, os.path.join(MODELS, name + "_opset17.onnx"), str(batch), str(steps)],
                         env=thread_env(threads), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print("onnxtrain profile, %s batch %d, %d threads (ms per step):\n%s" % (name, batch, threads, run.stdout), flush=True)


# ----------------------------------------------------------------------------------------------------
# torch side: a worker process (the chosen interpreter) that keeps one model and answers commands
# ----------------------------------------------------------------------------------------------------
def torch_worker(name, batch, threads, profile_steps, device="cpu", tf32=False):
    import numpy as np
    import onnx
    import torch
    import torch.nn.functional as F
    from onnx import numpy_helper

    sys.path.insert(0, MODELS)
    import make_fixtures

    torch.set_num_threads(threads)
    if torch.get_num_threads() != threads:
        sys.exit("torch runs %d threads, not %d" % (torch.get_num_threads(), threads))
    model = make_fixtures.build(name)
    weights = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
               for t in onnx.load(os.path.join(MODELS, name + "_opset17.onnx")).graph.initializer}
    state = model.state_dict()
    missing = [k for k in state if k not in weights and not k.endswith("num_batches_tracked")]
    if missing:
        sys.exit("%s: not in the ONNX file: %s" % (name, missing))
    model.load_state_dict({k: weights[k] for k in state if k in weights}, strict=False)
    model.train()
    model.to(device)
    # torch's own defaults differ (cuDNN convolutions may use TF32, matmuls not): set both as onnxtrain runs.
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    rng = np.random.default_rng(0)
    pool = 16  # batches of random data cycled through, like onnxtrain's data loader picks rows
    xs = torch.from_numpy(rng.standard_normal((pool * batch,) + input_dims(name)).astype(np.float32))
    ys = torch.from_numpy(rng.integers(0, CLASSES, pool * batch).astype(np.int64))
    xs, ys = xs.to(device), ys.to(device)  # on a GPU the data pool is resident, as a pinned-loader would make it
    counter = [0]

    def step():
        i = counter[0] % pool
        counter[0] += 1
        x, y = xs[i * batch:(i + 1) * batch], ys[i * batch:(i + 1) * batch]
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()  # the loss reaches the host every step, as onnxtrain's progress reads it

    print(json.dumps({"ready": True, "torch": torch.__version__, "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command.get("profile"):
            for _ in range(command["warmup"]):
                step()
            with torch.autograd.profiler.profile() as prof:
                for _ in range(profile_steps):
                    step()
            table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20)
            print(json.dumps({"table": table, "steps": profile_steps}), flush=True)
            continue
        for _ in range(command["warmup"]):
            step()
        start = time.perf_counter()
        for _ in range(command["steps"]):
            step()
        seconds = time.perf_counter() - start
        print(json.dumps({"samples_per_s": command["steps"] * batch / seconds}), flush=True)


class WorkerProcess:
    """A helper process on `threads` threads that answers each JSON command line on its stdin with one JSON
    line (its first line: what it loaded, in `info`)."""
    def __init__(self, argv, threads):
        self.proc = subprocess.Popen(argv, env=thread_env(threads), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        self.info = self._read()

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            sys.exit("the torch worker (%s) died" % " ".join(self.proc.args))
        return json.loads(line)

    def ask(self, **command):
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


class TorchWorker(WorkerProcess):
    def __init__(self, python, name, batch, threads, profile_steps, device, tf32):
        super().__init__([python, os.path.abspath(__file__), "--torch-worker", "%s:%d" % (name, batch), "--threads",
                          str(threads), "--profile-steps", str(profile_steps), "--device", device] +
                         (["--tf32"] if tf32 else []), threads)


# ----------------------------------------------------------------------------------------------------
def parse_models(text):
    out = []
    for item in text.split(","):
        name, batch = item.split(":")
        if name not in DEFAULT_STEPS:
            sys.exit("unknown model %s (one of %s)" % (name, ", ".join(DEFAULT_STEPS)))
        out.append((name, int(batch)))
    return out


def print_markdown_table(lines):
    """Prints rows of strings (the first one the header) as a Markdown table with aligned columns."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    for i, line in enumerate(lines):
        print("| " + " | ".join(cell.ljust(w) for cell, w in zip(line, widths)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


def fmt_rates(values):
    return "%.0f [%.0f-%.0f]" % (statistics.median(values), min(values), max(values))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="onnxtrain build folder (default build/)")
    p.add_argument("--binary", help="the onnxtrain executable to time, instead of the one under --build "
                                    "(tools/gpu-check.sh --bundle passes its prebuilt one)")
    p.add_argument("--python", default=DEFAULT_PYTHON, help="interpreter with torch (default %s)" % DEFAULT_PYTHON)
    p.add_argument("--models", default="cnn:64,resnet:32", help="NAME:BATCH,... of cnn, mlp, resnet")
    p.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=5, help="steps discarded before each timed block")
    p.add_argument("--steps", type=int, default=0, help="timed steps per repeat (default per model: %s)" % DEFAULT_STEPS)
    p.add_argument("--profile", action="store_true",
                   help="also print torch's profiler table and onnxtrain's per-op times "
                        "(BUILD/benchmarks/training_step_profile) per configuration")
    p.add_argument("--profile-steps", type=int, default=20)
    p.add_argument("--wait-idle", type=float, default=0, metavar="SECONDS",
                   help="before each timed block wait up to SECONDS for the CPUs to be idle (<10%% busy; shared "
                        "machines; default 0: do not wait)")
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="where both sides train: cpu (default) or cuda (cuda:0 for onnxtrain and torch)")
    p.add_argument("--tf32", action="store_true",
                   help="cuda: both sides may use TF32 tensor cores for convolutions and matrix products (onnxtrain "
                        "--tf32; torch's cudnn and matmul allow_tf32); default: strict float32 on both")
    p.add_argument("--torch-worker", help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.torch_worker:
        name, batch = args.torch_worker.split(":")
        torch_worker(name, int(batch), int(args.threads), args.profile_steps, args.device, args.tf32)
        return

    binary = find_onnxtrain(os.path.abspath(args.build), args.binary)
    configs = [(n, b, int(t)) for n, b in parse_models(args.models) for t in args.threads.split(",")]
    rows, torch_version = [], None
    print("onnxtrain: %s\ntorch: %s; %d repeats, %d warm-up steps; load average %s" %
          (binary, args.python, args.repeats, args.warmup, " ".join("%.2f" % x for x in os.getloadavg())), flush=True)
    with tempfile.TemporaryDirectory(prefix="compare_pytorch_") as workdir:
        for name, batch, threads in configs:
            steps = args.steps or DEFAULT_STEPS[name]
            worker = TorchWorker(args.python, name, batch, threads, args.profile_steps, args.device, args.tf32)
            torch_version = worker.info["torch"]
            ours, theirs = [], []
            busy_repeats = 0
            for _ in range(args.repeats):
                if args.wait_idle and not wait_for_idle(args.wait_idle):
                    busy_repeats += 1
                ours.append(onnxtrain_repeat(binary, name, batch, threads, args.warmup, steps, workdir, args.device,
                                             args.tf32))
                if args.wait_idle and not wait_for_idle(args.wait_idle):
                    busy_repeats += 1
                theirs.append(worker.ask(warmup=args.warmup, steps=steps)["samples_per_s"])
            if args.profile:
                answer = worker.ask(profile=True, warmup=args.warmup)
                print("\ntorch %s profile, %s batch %d, %d threads, %d steps (ms per step: divide by %d):\n%s" %
                      (torch_version, name, batch, threads, answer["steps"], answer["steps"], answer["table"]),
                      flush=True)
                onnxtrain_profile(binary, name, batch, threads, args.profile_steps)
            worker.close()
            ratios = [a / b for a, b in zip(ours, theirs)]
            rows.append({"model": name, "batch": batch, "threads": threads, "steps": steps, "onnxtrain": ours,
                         "torch": theirs, "ratio": statistics.median(ours) / statistics.median(theirs),
                         "ratio_per_repeat": ratios})
            print("  %s b%d t%d: onnxtrain %s, torch %s samples/s%s" %
                  (name, batch, threads, fmt_rates(ours), fmt_rates(theirs),
                   ", %d timed blocks started on a busy machine" % busy_repeats if busy_repeats else ""), flush=True)

    print("\non %s%s; torch %s (%s); samples/s, median [min-max] of %d repeats; ratio = onnxtrain / torch medians "
          "[min-max of the per-repeat ratios]; load average after: %s\n" %
          (args.device, " with TF32" if args.tf32 else "", torch_version, args.python, args.repeats,
           " ".join("%.2f" % x for x in os.getloadavg())))
    header = ("model", "batch", "threads", "onnxtrain samples/s", "torch samples/s", "ratio")
    lines = [header] + [(r["model"], str(r["batch"]), str(r["threads"]), fmt_rates(r["onnxtrain"]), fmt_rates(r["torch"]),
                         "%.2f [%.2f-%.2f]" % (r["ratio"], min(r["ratio_per_repeat"]), max(r["ratio_per_repeat"])))
                        for r in rows]
    print_markdown_table(lines)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch_version, "python": args.python, "onnxtrain": binary, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
