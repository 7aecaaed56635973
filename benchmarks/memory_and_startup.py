#!/usr/bin/python3
"""Peak memory and start-up of a training run, onnxtrain against PyTorch (issue 23): the same torchvision
network, batch and thread count, each side one fresh process, measured from outside.

For each side it prints
  - peak RSS: the process's maximum resident set size (os.wait4's ru_maxrss), everything included
    (libraries, weights, optimizer state, activations, buffers);
  - first step: seconds from the process's start to the end of the first training step (import, graph
    building, kernel creation, data, the first step itself);
  - step: the median of the later steps' times;
  - start-up beyond one step: first step minus step (issue 23's goal: within 2 s).
and the ratios onnxtrain / PyTorch.

onnxtrain: `onnxtrain train MODEL --data synthetic:C,H,W:CLASSES:N --batch B --metrics FILE` with
OMP_NUM_THREADS=T; the step ends come from the metrics file's wall_time (seconds since the epoch). MODEL is
models/zoo/NAME.onnx (models/zoo/make_zoo.py NAME makes it: TorchScript, training mode, BatchNorm kept).
PyTorch: torchvision.models.NAME(num_classes=CLASSES) in train() mode, torch.set_num_threads(T),
torch.optim.SGD(lr 0.01, momentum 0.9), cross-entropy, random inputs of the same sizes; the same
momentum-SGD step `onnxtrain train` takes by default. Each side runs alone; run it on an idle machine (it
prints the load average first).

    benchmarks/memory_and_startup.py --python /tmp/torchvenv/bin/python            # resnet50, batch 16, 2 threads
    benchmarks/memory_and_startup.py --network resnet18 --batch 32 --threads 1 --steps 6
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TORCH_WORKER = r"""
import sys, time, json
start = float(sys.argv[1]); out = sys.argv[2]; name = sys.argv[3]
batch, threads, steps, classes, side = map(int, sys.argv[4:9])
import torch, torchvision
torch.set_num_threads(threads)
torch.manual_seed(0)
model = getattr(torchvision.models, name)(num_classes=classes).train()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.rand(batch, 3, side, side)
y = torch.randint(0, classes, (batch,))
ends = []
for _ in range(steps):
    opt.zero_grad(set_to_none=False)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    ends.append(time.time() - start)
open(out, "w").write(json.dumps(ends))
"""


def measure(cmd, log, env=None):
    """Runs cmd as a child (its output into the file `log`) and waits for it with wait4, which gives that
    child's own peak RSS: (peak RSS in MB, the child's start time)."""
    start = time.time()
    pid = os.fork()
    if pid == 0:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.execvpe(cmd[0], cmd, env or os.environ)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("%s failed (exit %d):\n%s" % (" ".join(cmd), os.waitstatus_to_exitcode(status), open(log).read()[-3000:]))
    return usage.ru_maxrss / 1024.0, start


def onnxtrain_side(args, workdir):
    model = os.path.join(ROOT, "models", "zoo", args.network + ".onnx")
    if not os.path.exists(model):
        sys.exit("%s is missing: make it with models/zoo/make_zoo.py %s" % (model, args.network))
    metrics = os.path.join(workdir, "metrics.jsonl")
    data = "synthetic:3,%d,%d:%d:%d" % (args.size, args.size, args.classes, args.batch * args.steps)
    cmd = [args.binary, "train", model, "--data", data, "--batch", str(args.batch), "--epochs", "1",
           "--validation", "0", "--test-data", "none", "--metrics", metrics, "-o", os.path.join(workdir, "out.onnx")]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    rss, start = measure(cmd, os.path.join(workdir, "onnxtrain.log"), env)
    with open(metrics) as f:
        rows = [json.loads(line) for line in f if '"step"' in line]
    return rss, [r["wall_time"] - start for r in rows]


def torch_side(args, workdir):
    out = os.path.join(workdir, "torch.json")
    script = os.path.join(workdir, "torch_worker.py")
    with open(script, "w") as f:
        f.write(TORCH_WORKER)
    # The worker measures from the time it is given, just before the fork: as the onnxtrain side's start.
    cmd = [args.python, script, repr(time.time()), out, args.network] + [
        str(v) for v in (args.batch, args.threads, args.steps, args.classes, args.size)]
    rss, _ = measure(cmd, os.path.join(workdir, "torch.log"))
    with open(out) as f:
        return rss, json.load(f)


def summary(rss, ends):
    steps = [b - a for a, b in zip(ends, ends[1:])]
    step = statistics.median(steps) if steps else float("nan")
    return {"peak_rss_mb": rss, "first_step_s": ends[0], "step_s": step, "startup_beyond_one_step_s": ends[0] - step}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    p.add_argument("--binary", help="onnxtrain executable (default BUILD/tools/onnxtrain)")
    p.add_argument("--python", default="/usr/bin/python3", help="interpreter with torch and torchvision")
    p.add_argument("--network", default="resnet50", help="a torchvision network in models/zoo/zoo.json (default resnet50)")
    p.add_argument("--size", type=int, default=224, help="input height and width (default 224)")
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=4, help="training steps per side (default 4)")
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args()
    args.binary = args.binary or os.path.join(args.build, "tools", "onnxtrain")
    print("load average %s; %s, batch %d, %dx%d, %d threads, %d steps" % (
        " ".join(open("/proc/loadavg").read().split()[:3]), args.network, args.batch, args.size, args.size,
        args.threads, args.steps))
    with tempfile.TemporaryDirectory() as workdir:
        ours = summary(*onnxtrain_side(args, workdir))
        theirs = summary(*torch_side(args, workdir))
    rows = [("peak RSS (MB)", "peak_rss_mb", "%.0f"), ("first step (s)", "first_step_s", "%.2f"),
            ("step (s)", "step_s", "%.2f"), ("start-up beyond one step (s)", "startup_beyond_one_step_s", "%.2f")]
    print("%-30s %10s %10s %8s" % ("", "onnxtrain", "torch", "ratio"))
    for label, key, fmt in rows:
        print("%-30s %10s %10s %8.2f" % (label, fmt % ours[key], fmt % theirs[key], ours[key] / theirs[key]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"onnxtrain": ours, "torch": theirs, "args": vars(args)}, f, indent=1)


if __name__ == "__main__":
    main()
