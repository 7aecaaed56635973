#!/usr/bin/python3
"""Training speed of onnxtrain against PyTorch on the CPU, side by side: samples/s of one full training
step (forward, softmax cross-entropy, backward, momentum-SGD update; BatchNorm in training mode updating
its running statistics) of the same model, batch and thread count, and what that is in GFLOP/s.

The models: the repository's fixtures cnn, mlp and resnet (models/make_fixtures.py, the files
models/NAME_opset17.onnx), and networks built from torch/torchvision code, which the torch worker exports
itself (seed 0; TorchScript exporter, opset 17, train() mode with training=TrainingMode.TRAINING and
do_constant_folding=False, so every BatchNormalization and Dropout stays, with a symbolic batch, as
models/torchvision/make_torchvision.py does) into the script's temporary folder, for onnxtrain to train:
    mlp784        Flatten, Linear(784, 512), ReLU, Linear(512, 512), ReLU, Linear(512, 10); 1x28x28
    resnet18      torchvision.models.resnet18(num_classes=10) at 3x32x32 (ImageNet stem)
    vgg11         torchvision.models.vgg11(num_classes=10) at 3x32x32, changed: the features end 512x1x1
                  there and the TorchScript exporter cannot export its AdaptiveAvgPool2d((7, 7)) from 1x1
                  ("output size that are not factor of input size"), so `avgpool` is nn.Identity and the
                  classifier's first Linear takes 512 inputs, Linear(512, 4096) (initialised as torchvision
                  does: normal(0, 0.01), bias 0); the rest of the classifier (4096 -> 4096 -> 10, two
                  Dropout(0.5)) is torchvision's. (models/zoo/make_zoo.py's vgg11_32 instead has the CIFAR
                  classifier, one Linear(512, 10).)
    mobilenet_v2  torchvision.models.mobilenet_v2(num_classes=10) at 3x32x32 (ImageNet stem)
    vit           torchvision.models.VisionTransformer at 3x32x32: patches of 4x4 (64 tokens and the class
                  token), 6 layers of width 256, 8 heads, MLP 512, 10 classes (3.2M parameters)
    resnet50      torchvision.models.resnet50(num_classes=10) at 3x224x224 (ImageNet size; for --device cuda,
                  where tools/gpu-check.sh times it: one step at batch 64 takes seconds on a CPU core)
    lstm          a sequence classifier: nn.LSTM(64, 256, batch_first=True) over 32 steps of 64 features, its
                  last hidden state into Linear(256, 10) (the ONNX LSTM op; input 32x64)
    unet          a small UNet at 3x32x32 (small_unet_class): Conv-BN-ReLU blocks of 32, 64 and 128 channels,
                  max pooling down, bilinear F.interpolate up with skip concatenations, a PixelShuffle head
                  (Resize and DepthToSpace in ONNX), 10 classes
Both sides start from the same weights: the worker loads the ONNX file's initializers into its module, for
the fixtures and its own exports alike (the running statistics in its exports are the fresh ones, mean 0
and var 1, as constructed).

FLOPs: the worker counts the forward FLOPs of one sample directly, 2 * the multiply-adds of every Conv and
Linear, of every MultiheadAttention (its input and output projections and its two attention products,
Q.K^T and P.V) and of every RNN, GRU and LSTM layer (its gates' two products at each step) (forward hooks,
one sample in eval() mode; BatchNorm, LayerNorm, activations, softmax, pooling, the loss and the update
are not counted), and takes a training step as 3 x forward (forward,
backward to the data, backward to the weights). GFLOP/s = samples/s * step FLOPs per sample / 1e9. The
peak: before each configuration's timed blocks, the worker times float32 torch.mm of two 2048x2048
matrices (on --device, after warm-up, repeated for about a second): 2 * 2048^3 * repetitions / seconds; on
the CPU so does BUILD/benchmarks/gemm_peak with oneDNN's sgemm (torch's MKL under-reads AMD hosts by up to a
third). A thread count's peak is the best of all its samples over the whole run (a shared host's noise only
lowers a sample; one low torch.mm sample made VGG-11 run at 168% of "the peak"); "% of peak" is onnxtrain's
GFLOP/s against it. That count credits every kernel tap, also those that fall in the zero padding (8 of 9
of ResNet-18's layer4 at 32x32, which onnxtrain neither computes nor trains); "% of peak, live taps" counts
only the (output position, tap) pairs whose input lies inside the input: the multiply-adds onnxtrain does.

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
    benchmarks/compare_pytorch.py --python /tmp/torchvenv/bin/python --threads 1,2 \
        --models mlp784:64,resnet18:32,vgg11:32,mobilenet_v2:32   # the torchvision networks (torch 2.x, torchvision)
    benchmarks/compare_pytorch.py --python /work/venv/torchnew/bin/python   # torch 2.x instead of 1.13
    benchmarks/compare_pytorch.py --profile --models resnet:32 --threads 1  # + per-op profiles of both
    benchmarks/compare_pytorch.py --device cuda --models resnet:64 --threads 1   # both on cuda:0 (gpu-check.sh)
    benchmarks/compare_pytorch.py --device cuda --tf32 ...   # both with TF32 tensor cores (default: neither)
    benchmarks/compare_pytorch.py --precision bf16 ...       # onnxtrain --precision bf16 against torch.autocast(bfloat16)
    benchmarks/compare_pytorch.py --binary /tmp/onnxtrain-gpu-bundle/onnxtrain ...   # an executable outside a build

The default interpreter for torch is Debian's /usr/bin/python3 (torch 1.13), the one the fixture scripts
use. This script itself needs only the standard library; the worker (this file run with --torch-worker
by that interpreter) needs torch, onnx and numpy, and torchvision for resnet18, vgg11 and mobilenet_v2
(the exports were checked with torch 2.15, torchvision 0.29, onnx 1.23: /tmp/torchvenv/bin/python as
models/torchvision/make_torchvision.py makes it).
"""
import argparse
import json
import math
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
# (C, H, W) of the image input: the fixtures of models/make_fixtures.py (models/NAME_opset17.onnx) ...
FIXTURES = {"cnn": (1, 28, 28), "mlp": (1, 28, 28), "resnet": (3, 32, 32)}
# ... and the networks built from torch/torchvision code, which the worker exports itself (build_network).
TORCH_NETWORKS = {"mlp784": (1, 28, 28), "resnet18": (3, 32, 32), "vgg11": (3, 32, 32), "mobilenet_v2": (3, 32, 32),
                  "vit": (3, 32, 32), "resnet50": (3, 224, 224), "unet": (3, 32, 32), "lstm": (32, 64)}
# Timed steps per repeat: about a second of work at one thread on a small 2-core machine.
DEFAULT_STEPS = {"cnn": 100, "mlp": 200, "resnet": 25, "mlp784": 200, "resnet18": 6, "vgg11": 2, "mobilenet_v2": 7,
                 "vit": 4, "resnet50": 1, "unet": 4, "lstm": 20}
PEAK_N = 2048  # the float32 GEMM peak: torch.mm of two PEAK_N x PEAK_N matrices
PEAK_SECONDS = 1.0


def input_dims(name):
    """The sizes of one sample: (C, H, W) of an image, (T, features) of the lstm's sequence."""
    return FIXTURES[name] if name in FIXTURES else TORCH_NETWORKS[name]


def fixture_path(name):
    return os.path.join(MODELS, name + "_opset17.onnx")


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


def cpu_steal_ticks():
    """(stolen, total) CPU ticks since boot over all CPUs (Linux /proc/stat; steal is the 8th field): the time a
    virtual machine's CPUs were runnable but the hypervisor ran something else, the load `uptime` cannot see."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return (fields[7] if len(fields) > 7 else 0), sum(fields)


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
def train_command(binary, name, batch, total, workdir, device="cpu", tf32=False, model=None, precision="fp32"):
    """The `onnxtrain train` command of `total` steps of `batch` and its --metrics file; `model`: the ONNX
    file (default: the fixture's, models/NAME_opset17.onnx)."""
    metrics = os.path.join(workdir, "metrics.jsonl")
    cmd = [binary, "train", model or fixture_path(name),
           "--data", "synthetic:%s:%d:%d" % (",".join(map(str, input_dims(name))), CLASSES, batch * total),
           "--batch", str(batch), "--epochs", "1", "--validation", "0", "--lr", str(LR),
           "--optimizer", "momentum", "--momentum", str(MOMENTUM), "--log-every", "1000000",
           "--metrics", metrics, "--device", device, "-o", os.path.join(workdir, "trained.onnx")]
    cmd += ["--tf32"] if tf32 else []
    cmd += ["--precision", precision] if precision != "fp32" else []
    return cmd, metrics


def onnxtrain_repeat(binary, name, batch, threads, warmup, steps, workdir, device="cpu", tf32=False, model=None,
                     precision="fp32"):
    """Samples/s over `steps` steps after `warmup` steps, in one fresh `onnxtrain train` process (arguments as
    train_command's)."""
    cmd, metrics = train_command(binary, name, batch, warmup + steps, workdir, device, tf32, model, precision)
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


def onnxtrain_profile(onnxtrain, name, batch, threads, steps, model=None, device="cpu", workdir=None, tf32=False,
                      precision="fp32"):
    """Per-op times of the same step. CPU: kernel times from benchmarks/training_step_profile.cc, when it is
    built in the same build folder as the onnxtrain binary. CUDA: GPU and host times per op type of
    `onnxtrain train` under ONNXTRAIN_CUDA_PROFILE=1 (executor/cuda_run_profile.h). `model` as in
    train_command."""
    if device == "cuda":
        cmd, _ = train_command(onnxtrain, name, batch, steps + 1, workdir, device, tf32, model, precision)
        env = dict(thread_env(threads), ONNXTRAIN_CUDA_PROFILE="1")
        run = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        at = run.stderr.find("ONNXTRAIN_CUDA_PROFILE")
        print("onnxtrain profile, %s batch %d on cuda (exit %d):\n%s" %
              (name, batch, run.returncode, run.stderr[at:] if at >= 0 else run.stderr[-2000:]), flush=True)
        return
    binary = os.path.join(os.path.dirname(os.path.dirname(onnxtrain)), "benchmarks", "training_step_profile")
    if not os.access(binary, os.X_OK):
        print("(no %s: build the training_step_profile target for onnxtrain's per-op times)\n" % binary)
        return
    run = subprocess.run([binary, model or fixture_path(name), str(batch), str(steps)],
                         env=thread_env(threads), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print("onnxtrain profile, %s batch %d, %d threads (ms per step):\n%s" % (name, batch, threads, run.stdout), flush=True)


# ----------------------------------------------------------------------------------------------------
# torch side: a worker process (the chosen interpreter) that keeps one model and answers commands
# ----------------------------------------------------------------------------------------------------
def small_unet_class():
    """A small UNet (the `unet` network): two levels of Conv-BN-ReLU with max pooling down, bilinear
    F.interpolate up (Resize) with skip concatenations, a PixelShuffle head (DepthToSpace) and the mean over
    its 16 channels at 64x64 into a Linear."""
    import torch
    from torch import nn
    import torch.nn.functional as F

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())

    class SmallUNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.e1, self.e2, self.e3 = block(3, 32), block(32, 64), block(64, 128)
            self.d2, self.d1 = block(128 + 64, 64), block(64 + 32, 32)
            self.shuffle = nn.Sequential(nn.Conv2d(32, 64, 1), nn.PixelShuffle(2))
            self.head = nn.Linear(16, CLASSES)

        def forward(self, x):
            def up(t):
                return F.interpolate(t, scale_factor=2, mode="bilinear", align_corners=False)
            a = self.e1(x)
            b = self.e2(F.max_pool2d(a, 2))
            c = self.e3(F.max_pool2d(b, 2))
            d = self.d1(torch.cat([up(self.d2(torch.cat([up(c), b], 1))), a], 1))
            return self.head(self.shuffle(d).mean((2, 3)))

    return SmallUNet


def lstm_classifier_class():
    """The `lstm` network: nn.LSTM over the sequence, its last hidden state classified."""
    from torch import nn

    class LstmClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(64, 256, batch_first=True)
            self.fc = nn.Linear(256, CLASSES)

        def forward(self, x):
            _, (h, _) = self.lstm(x)
            return self.fc(h[-1])

    return LstmClassifier


def build_network(name):
    """The torch module of `name` in train() mode, seed 0: a fixture of models/make_fixtures.py or one of
    TORCH_NETWORKS (see the module's docstring)."""
    import torch
    from torch import nn

    if name in FIXTURES:
        sys.path.insert(0, MODELS)
        import make_fixtures
        return make_fixtures.build(name)
    import torchvision
    torch.manual_seed(0)
    if name == "mlp784":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                              nn.Linear(512, CLASSES))
    elif name == "resnet18":
        model = torchvision.models.resnet18(weights=None, num_classes=CLASSES)
    elif name == "vgg11":
        model = torchvision.models.vgg11(weights=None, num_classes=CLASSES)
        # At 32x32 the features end 512x1x1; the exporter cannot export AdaptiveAvgPool2d((7, 7)) from 1x1.
        model.avgpool = nn.Identity()
        model.classifier[0] = nn.Linear(512, model.classifier[0].out_features)
        nn.init.normal_(model.classifier[0].weight, 0, 0.01)  # torchvision's VGG initialises its Linears so
        nn.init.constant_(model.classifier[0].bias, 0)
    elif name == "mobilenet_v2":
        model = torchvision.models.mobilenet_v2(weights=None, num_classes=CLASSES)
    elif name == "vit":
        model = torchvision.models.VisionTransformer(image_size=32, patch_size=4, num_layers=6, num_heads=8,
                                                     hidden_dim=256, mlp_dim=512, num_classes=CLASSES)
    elif name == "resnet50":
        model = torchvision.models.resnet50(weights=None, num_classes=CLASSES)
    elif name == "unet":
        model = small_unet_class()()
    elif name == "lstm":
        model = lstm_classifier_class()()
    else:
        sys.exit("unknown model %s" % name)
    model.train()
    return model


def export_network(model, name, path):
    """Exports `model` (a TORCH_NETWORKS module, unchanged by this) as models/torchvision/make_torchvision.py
    does: TorchScript, opset 17, training mode with BatchNormalization and Dropout kept, symbolic batch. The
    trace's forward in train() mode moves the BN running statistics; the file gets the module's ones."""
    import contextlib
    import copy
    import warnings
    import onnx
    import torch
    from onnx import numpy_helper

    import inspect

    buffers = {k: v.detach().clone() for k, v in model.state_dict().items() if "running_" in k}
    # torch 2.x defaults to the dynamo exporter, which folds BatchNormalization away; 1.13 has only TorchScript.
    exporter = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):  # stdout is the JSON channel
        warnings.simplefilter("ignore")
        torch.onnx.export(copy.deepcopy(model).train(), (torch.randn(2, *input_dims(name)),), path, **exporter,
                          opset_version=17, export_params=True, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    m = onnx.load(path)
    for i, t in enumerate(m.graph.initializer):
        if t.name in buffers:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(buffers.pop(t.name).numpy(), t.name))
    if buffers:
        sys.exit("%s: BN buffers not found as initializers: %s" % (path, sorted(buffers)))
    onnx.save_model(m, path)


def load_onnx_weights(model, name, path):
    """Loads the initializers of the ONNX file `path` into `model` by name (as models/expected/make_gradients.py
    does); every parameter and buffer (but num_batches_tracked) must be there."""
    import onnx
    import torch
    from onnx import numpy_helper

    weights = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in onnx.load(path).graph.initializer}
    state = model.state_dict()
    missing = [k for k in state if k not in weights and not k.endswith("num_batches_tracked")]
    if missing:
        sys.exit("%s: not in the ONNX file %s: %s" % (name, path, missing))
    model.load_state_dict({k: weights[k] for k in state if k in weights}, strict=False)


def live_pairs(out, kernel, stride, pad, dilation, size):
    """The (output position, tap) pairs of one axis whose input position lies inside the input."""
    return sum(1 for o in range(out) for t in range(kernel) if 0 <= o * stride - pad + t * dilation < size)


def attention_macs(m, inputs):
    """Multiply-adds of one call of nn.MultiheadAttention `m`: the q/k/v input projections (in_proj_weight
    or q/k/v_proj_weight, applied through F.linear or the fused kernel, not through an nn.Linear module),
    Q.K^T and P.V (batch * heads * S_q * S_k * head_dim each, heads * head_dim = embed_dim) and out_proj."""
    query = inputs[0]
    key = inputs[1] if len(inputs) > 1 else query  # positional (query, key, value); else self-attention
    value = inputs[2] if len(inputs) > 2 else key
    seq = 1 if m.batch_first and query.dim() == 3 else 0  # (N, L, E), else (L, N, E) or unbatched (L, E)
    tokens_q, tokens_k, tokens_v = (t.numel() // t.shape[-1] for t in (query, key, value))
    if m._qkv_same_embed_dim:  # packed 3E x E: rows [0, E) project the query, [E, 2E) the key, [2E, 3E) the value
        proj = (tokens_q + tokens_k + tokens_v) * m.embed_dim * m.embed_dim
    else:
        proj = (tokens_q * m.q_proj_weight.numel() + tokens_k * m.k_proj_weight.numel()
                + tokens_v * m.v_proj_weight.numel())
    s_k = key.shape[seq] + (m.bias_k is not None) + int(m.add_zero_attn)  # both append a key/value position
    products = 2 * tokens_q * s_k * m.embed_dim  # tokens_q = batch * S_q
    return proj + products + tokens_q * m.out_proj.in_features * m.out_proj.out_features


def forward_flops(model, name):
    """Forward FLOPs of one sample: 2 * the multiply-adds of every Conv, Linear and MultiheadAttention
    (projections and attention products), counted by forward hooks on one sample (eval() mode, so BatchNorm
    takes a single sample and its statistics stay): all of them, and only those of taps inside the input
    (live)."""
    import torch
    from torch import nn

    macs = [0, 0]

    def conv(m, inputs, out):
        all_pairs = out.numel() // out.shape[1] * math.prod(m.kernel_size)
        macs[0] += out.shape[1] * all_pairs * (m.in_channels // m.groups)
        if isinstance(m.padding, str):  # "same"/"valid": counted whole
            macs[1] += out.shape[1] * all_pairs * (m.in_channels // m.groups)
            return
        live = 1
        for axis in range(len(m.kernel_size)):
            live *= live_pairs(out.shape[2 + axis], m.kernel_size[axis], m.stride[axis], m.padding[axis],
                               m.dilation[axis], inputs[0].shape[2 + axis])
        macs[1] += out.shape[1] * live * (m.in_channels // m.groups)

    def linear(m, inputs, out):
        macs[0] += out.numel() * m.in_features
        macs[1] += out.numel() * m.in_features

    def recurrent(m, inputs, out):  # every layer and direction: T steps of gates x H x (its input + H)
        gates = {"LSTM": 4, "GRU": 3}.get(m.mode, 1)
        steps = inputs[0].shape[1 if m.batch_first else 0]
        directions = 2 if m.bidirectional else 1
        for layer in range(m.num_layers):
            width = m.input_size if layer == 0 else m.hidden_size * directions
            n = steps * directions * gates * m.hidden_size * (width + m.hidden_size)
            macs[0] += n
            macs[1] += n

    def attention(m, inputs, out):
        n = attention_macs(m, inputs)
        macs[0] += n  # no padding: all of them are live
        macs[1] += n

    hooks = [m.register_forward_hook(conv) for m in model.modules() if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d))]
    attentions = [m for m in model.modules() if isinstance(m, nn.MultiheadAttention)]
    # attention_macs counts out_proj: in eval() without grad MultiheadAttention takes its fused fast path,
    # which uses out_proj's weight without calling the module, so its own hook would fire only sometimes.
    out_projs = {id(m.out_proj) for m in attentions}
    hooks += [m.register_forward_hook(linear) for m in model.modules()
              if isinstance(m, nn.Linear) and id(m) not in out_projs]
    hooks += [m.register_forward_hook(attention) for m in attentions]
    hooks += [m.register_forward_hook(recurrent) for m in model.modules() if isinstance(m, nn.RNNBase)]
    training = model.training
    model.eval()
    with torch.no_grad():
        model(torch.zeros((1,) + input_dims(name)))
    model.train(training)
    for h in hooks:
        h.remove()
    return 2 * macs[0], 2 * macs[1]


def gemm_peak(device, n=PEAK_N, seconds=PEAK_SECONDS):
    """float32 GEMM GFLOP/s of torch.mm on two n x n matrices on `device` at torch's thread count: warm-up,
    then repetitions for about `seconds`; 2 n^3 repetitions / seconds."""
    import torch

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(device)
    b = torch.randn(n, n, generator=g).to(device)
    c = torch.empty(n, n, device=device)
    for _ in range(2 if device == "cpu" else 10):
        torch.mm(a, b, out=c)
    sync()
    reps, chunk = 0, 1
    start = time.perf_counter()
    while True:
        for _ in range(chunk):
            torch.mm(a, b, out=c)
        sync()
        reps += chunk
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
        if device != "cpu":
            chunk = min(2 * chunk, 64)  # a GPU's calls only queue: synchronise after blocks of them
    return {"gflops": 2.0 * n ** 3 * reps / elapsed / 1e9, "n": n, "repetitions": reps, "seconds": elapsed}


def record_peak_samples(peaks, peak_samples, threads, samples):
    """Adds GEMM peak samples (dicts with "gflops") taken at `threads`: peak_samples[threads] lists every
    sample's GFLOP/s in order, peaks[threads] is the best sample so far (noise only lowers a sample)."""
    for sample in samples:
        peak_samples.setdefault(threads, []).append(sample["gflops"])
        if threads not in peaks or sample["gflops"] > peaks[threads]["gflops"]:
            peaks[threads] = sample


def onnxtrain_gemm_peak(onnxtrain, threads, n=PEAK_N, seconds=PEAK_SECONDS):
    """The same float32 product on oneDNN's sgemm (BUILD/benchmarks/gemm_peak.cc) at `threads`: its JSON line,
    or None when that tool was not built (a --binary outside a build folder)."""
    tool = os.path.join(os.path.dirname(os.path.dirname(onnxtrain)), "benchmarks", "gemm_peak")
    if not os.path.exists(tool):
        return None
    out = subprocess.run([tool, str(n), str(seconds)], env=thread_env(threads), check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def torch_worker(name, batch, threads, profile_steps, device="cpu", tf32=False, workdir=None, precision="fp32"):
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    if torch.get_num_threads() != threads:
        sys.exit("torch runs %d threads, not %d" % (torch.get_num_threads(), threads))
    model = build_network(name)
    if name in FIXTURES:
        path = fixture_path(name)
    else:
        # Exported once per run of this script (every worker of the network builds the same module).
        path = os.path.join(workdir or tempfile.gettempdir(), name + "_torch_opset17.onnx")
        if not os.path.exists(path):
            export_network(model, name, path + ".part")
            os.replace(path + ".part", path)
    load_onnx_weights(model, name, path)
    flops, live_flops = forward_flops(model, name)
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
        if precision == "bf16":  # autocast as onnxtrain's --precision bf16: Conv, Linear and matmul in bfloat16
            with torch.autocast(device_type=device, dtype=torch.bfloat16):
                logits = model(x)
            loss = F.cross_entropy(logits.float(), y)
        else:
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()  # the loss reaches the host every step, as onnxtrain's progress reads it

    print(json.dumps({"ready": True, "torch": torch.__version__, "threads": torch.get_num_threads(), "model": path,
                      "forward_flops_per_sample": flops, "forward_live_flops_per_sample": live_flops}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command.get("peak"):
            print(json.dumps(gemm_peak(device)), flush=True)
            continue
        if command.get("profile"):
            for _ in range(command["warmup"]):
                step()
            if device == "cuda":  # kernel times on the GPU, by the op that launched them
                activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
                with torch.profiler.profile(activities=activities) as prof:
                    for _ in range(profile_steps):
                        step()
                    torch.cuda.synchronize()
                averages = prof.key_averages()
                try:
                    table = averages.table(sort_by="self_device_time_total", row_limit=25)
                except (AttributeError, KeyError, ValueError):  # torch before 2.4 says cuda, not device
                    table = averages.table(sort_by="self_cuda_time_total", row_limit=25)
            else:
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
    """info: torch's version, the ONNX file onnxtrain trains ("model": the fixture, or the worker's export of a
    TORCH_NETWORKS network into `workdir`) and its forward FLOPs per sample."""
    def __init__(self, python, name, batch, threads, profile_steps, device, tf32, workdir, precision):
        super().__init__([python, os.path.abspath(__file__), "--torch-worker", "%s:%d" % (name, batch), "--threads",
                          str(threads), "--profile-steps", str(profile_steps), "--device", device,
                          "--workdir", workdir, "--precision", precision] + (["--tf32"] if tf32 else []), threads)


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


def fmt_peaks(peaks, samples):
    return ", ".join("%d thread%s %.1f GFLOP/s (samples %s)" %
                     (t, "" if t == 1 else "s", peaks[t]["gflops"], " ".join("%.1f" % g for g in samples[t]))
                     for t in sorted(peaks))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="onnxtrain build folder (default build/)")
    p.add_argument("--binary", help="the onnxtrain executable to time, instead of the one under --build "
                                    "(tools/gpu-check.sh --bundle passes its prebuilt one)")
    p.add_argument("--python", default=DEFAULT_PYTHON, help="interpreter with torch (default %s)" % DEFAULT_PYTHON)
    p.add_argument("--models", default="cnn:64,resnet:32",
                   help="NAME:BATCH,... of cnn, mlp, resnet (the fixtures) and %s (built from torch/torchvision "
                        "code; the batches of the issue: mlp784:64,resnet18:32,vgg11:32,mobilenet_v2:32)"
                        % ", ".join(TORCH_NETWORKS))
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
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                   help="bf16: onnxtrain --precision bf16 against torch.autocast(dtype=torch.bfloat16) around the "
                        "forward (default fp32 on both); GFLOP/s and %% of peak stay against the float32 GEMM peak")
    p.add_argument("--torch-worker", help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.torch_worker:
        name, batch = args.torch_worker.split(":")
        torch_worker(name, int(batch), int(args.threads), args.profile_steps, args.device, args.tf32, args.workdir,
                     args.precision)
        return

    binary = find_onnxtrain(os.path.abspath(args.build), args.binary)
    configs = [(n, b, int(t)) for n, b in parse_models(args.models) for t in args.threads.split(",")]
    rows, torch_version = [], None
    peaks = {}  # threads -> the best of the worker's gemm_peak samples
    peak_samples = {}  # threads -> every sample's GFLOP/s, in order
    steal_start = cpu_steal_ticks()
    print("onnxtrain: %s\ntorch: %s; %d repeats, %d warm-up steps; load average %s" %
          (binary, args.python, args.repeats, args.warmup, " ".join("%.2f" % x for x in os.getloadavg())), flush=True)
    with tempfile.TemporaryDirectory(prefix="compare_pytorch_") as workdir:
        for name, batch, threads in configs:
            steps = args.steps or DEFAULT_STEPS[name]
            worker = TorchWorker(args.python, name, batch, threads, args.profile_steps, args.device, args.tf32, workdir,
                                 args.precision)
            torch_version = worker.info["torch"]
            model = worker.info["model"]
            step_flops = 3 * worker.info["forward_flops_per_sample"]  # forward, backward to data and to weights
            step_live_flops = 3 * worker.info["forward_live_flops_per_sample"]
            if args.wait_idle:
                wait_for_idle(args.wait_idle)
            samples = [dict(worker.ask(peak=True), by="torch.mm")]
            ours_peak = onnxtrain_gemm_peak(binary, threads) if args.device == "cpu" else None
            if ours_peak:
                samples.append(dict(ours_peak, by="oneDNN sgemm"))
            record_peak_samples(peaks, peak_samples, threads, samples)
            print("  float32 GEMM peak (%dx%d) at %d threads: %s GFLOP/s" %
                  (PEAK_N, PEAK_N, threads, ", ".join("%s %.1f" % (x["by"], x["gflops"]) for x in samples)), flush=True)
            ours, theirs = [], []
            busy_repeats = 0
            for _ in range(args.repeats):
                if args.wait_idle and not wait_for_idle(args.wait_idle):
                    busy_repeats += 1
                ours.append(onnxtrain_repeat(binary, name, batch, threads, args.warmup, steps, workdir, args.device,
                                             args.tf32, model, args.precision))
                if args.wait_idle and not wait_for_idle(args.wait_idle):
                    busy_repeats += 1
                theirs.append(worker.ask(warmup=args.warmup, steps=steps)["samples_per_s"])
            if args.profile:
                answer = worker.ask(profile=True, warmup=args.warmup)
                print("\ntorch %s profile, %s batch %d, %d threads, %d steps (ms per step: divide by %d):\n%s" %
                      (torch_version, name, batch, threads, answer["steps"], answer["steps"], answer["table"]),
                      flush=True)
                onnxtrain_profile(binary, name, batch, threads, args.profile_steps, model, args.device, workdir,
                                  args.tf32, args.precision)
            worker.close()
            ratios = [a / b for a, b in zip(ours, theirs)]
            ours_gflops = statistics.median(ours) * step_flops / 1e9
            theirs_gflops = statistics.median(theirs) * step_flops / 1e9
            rows.append({"model": name, "batch": batch, "threads": threads, "steps": steps, "onnxtrain": ours,
                         "torch": theirs, "ratio": statistics.median(ours) / statistics.median(theirs),
                         "ratio_per_repeat": ratios, "model_file": model,
                         "forward_flops_per_sample": worker.info["forward_flops_per_sample"],
                         "step_flops_per_sample": step_flops,
                         "onnxtrain_gflops": ours_gflops, "torch_gflops": theirs_gflops,
                         "onnxtrain_gflops_per_repeat": [v * step_flops / 1e9 for v in ours],
                         "torch_gflops_per_repeat": [v * step_flops / 1e9 for v in theirs],
                         "step_live_flops_per_sample": step_live_flops})
            print("  %s b%d t%d: onnxtrain %s, torch %s samples/s; %.1f and %.1f GFLOP/s (%.1f MFLOP a sample's "
                  "step)%s" % (name, batch, threads, fmt_rates(ours), fmt_rates(theirs), ours_gflops, theirs_gflops,
                               step_flops / 1e6,
                               ", %d timed blocks started on a busy machine" % busy_repeats if busy_repeats else ""),
                  flush=True)

    for r in rows:  # against the best peak sample of the run, known only now
        peak = peaks[r["threads"]]["gflops"]
        r.update({"peak_gflops": peak, "onnxtrain_percent_of_peak": 100 * r["onnxtrain_gflops"] / peak,
                  "onnxtrain_live_percent_of_peak":
                      100 * statistics.median(r["onnxtrain"]) * r["step_live_flops_per_sample"] / 1e9 / peak,
                  "torch_percent_of_peak": 100 * r["torch_gflops"] / peak})
    steal_end = cpu_steal_ticks()
    steal_percent = 100.0 * (steal_end[0] - steal_start[0]) / max(steal_end[1] - steal_start[1], 1)
    print("\non %s%s, %s; torch %s (%s); samples/s, median [min-max] of %d repeats; ratio = onnxtrain / torch medians "
          "[min-max of the per-repeat ratios]; load average after: %s; CPU time stolen by the hypervisor during "
          "the run: %.1f%%\n" %
          (args.device, " with TF32" if args.tf32 else "", args.precision, torch_version, args.python, args.repeats,
           " ".join("%.2f" % x for x in os.getloadavg()), steal_percent))
    print("float32 GEMM peak (%dx%d, about %g s after warm-up, the best of torch.mm's and oneDNN sgemm's samples "
          "before each configuration)%s: %s; GFLOP/s = samples/s x step MFLOP per sample (3 x the forward's 2 x multiply-adds "
          "of every Conv, Linear, attention and recurrent layer) / 1000 at the medians\n" %
          (PEAK_N, PEAK_N, PEAK_SECONDS, " with TF32 allowed" if args.tf32 else "", fmt_peaks(peaks, peak_samples)))
    header = ("model", "batch", "threads", "onnxtrain samples/s", "torch samples/s", "ratio", "step MFLOP/sample",
              "onnxtrain GFLOP/s", "torch GFLOP/s", "onnxtrain % of peak", "% of peak, live taps")
    lines = [header] + [(r["model"], str(r["batch"]), str(r["threads"]), fmt_rates(r["onnxtrain"]), fmt_rates(r["torch"]),
                         "%.2f [%.2f-%.2f]" % (r["ratio"], min(r["ratio_per_repeat"]), max(r["ratio_per_repeat"])),
                         "%.1f" % (r["step_flops_per_sample"] / 1e6), "%.1f" % r["onnxtrain_gflops"],
                         "%.1f" % r["torch_gflops"], "%.1f%%" % r["onnxtrain_percent_of_peak"],
                         "%.1f%%" % r["onnxtrain_live_percent_of_peak"])
                        for r in rows]
    print_markdown_table(lines)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch_version, "python": args.python, "onnxtrain": binary, "precision": args.precision,
                       "peak": {"what": "the best of float32 torch.mm and (CPU) oneDNN sgemm of two %dx%d matrices "
                                        "on %s, 2 n^3 repetitions / seconds" % (PEAK_N, PEAK_N, args.device),
                                "tf32": args.tf32,
                                "by_threads": {str(t): v for t, v in sorted(peaks.items())},
                                "samples_by_threads": {str(t): v for t, v in sorted(peak_samples.items())}},
                       "cpu_steal_percent": steal_percent,
                       "flops": "forward: 2 x multiply-adds of every Conv, Linear, recurrent layer and attention "
                                "(projections, QK^T, PV) for one sample; step: 3 x forward; "
                                "live: only the (output position, tap) pairs whose input lies inside the input",
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
