#!/usr/bin/env python3
"""Checks that a model trained by onnxtrain is a valid ONNX model that ONNX Runtime runs to the same
logits as `onnxtrain run`. For each fixture:

 1. `onnxtrain train` trains it for a few steps on synthetic data and writes NAME_trained.onnx;
 2. onnx.checker (full_check) accepts the file, and its trained initializers differ from the original's
    (parameters, and BatchNorm running statistics where the model has them);
 3. `onnxtrain run` (input and output as .npy) and onnxruntime run the file on the same seeded batch, and
    their logits must agree: |ours - ort| <= atol + rtol * |ort| elementwise;
 4. models with BatchNormalization: onnxtrain writes them in inference mode (running statistics), so the
    evaluation copy (training_mode=0, running-statistics outputs dropped) must find nothing to change; it
    is checked the same way. When torch is importable, the
    torch module of models/make_fixtures.py with the trained weights in eval() state is a third opinion
    on that copy.

Exits 1 when any check fails. Needs onnx, onnxruntime and numpy: run by the venv interpreter (re-runs
itself with $ONNXTRAIN_VENV_PY, default /work/venv/torchnew/bin/python, when onnxruntime is missing):

    /work/venv/torchnew/bin/python tools/check_with_onnxruntime.py --build build/release
    tools/check_with_onnxruntime.py --models resnet --steps 20 --keep /tmp/ortcheck
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from onnxtrain_binary import find_onnxtrain  # noqa: E402
MODELS = os.path.join(ROOT, "models")
VENV_PY = os.environ.get("ONNXTRAIN_VENV_PY", "/work/venv/torchnew/bin/python")

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
except ImportError as e:
    # Once only (the venv's python may be a symlink to this very interpreter, so paths cannot tell).
    if not os.environ.get("ONNXTRAIN_ORTCHECK_REEXEC") and os.path.exists(VENV_PY):
        os.environ["ONNXTRAIN_ORTCHECK_REEXEC"] = "1"
        os.execv(VENV_PY, [VENV_PY] + sys.argv)
    sys.exit("%s: %s (needs onnx, onnxruntime and numpy; set ONNXTRAIN_VENV_PY to an interpreter with them)" %
             (sys.argv[0], e))

# name: (input (C, H, W), training batch)
FIXTURES = {"cnn": ((1, 28, 28), 64), "mlp": ((1, 28, 28), 64), "resnet": ((3, 32, 32), 32)}


def run(cmd):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (done.returncode, " ".join(cmd), done.stdout))
    return done.stdout


def initializers(model):
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def eval_copy(model):
    """The model with every BatchNormalization in inference mode (running statistics), its running-
    statistics outputs dropped (they are no graph outputs in these fixtures: checked)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    graph_outputs = {o.name for o in m.graph.output}
    changed = 0
    for node in m.graph.node:
        if node.op_type != "BatchNormalization":
            continue
        for attr in node.attribute:
            if attr.name == "training_mode" and attr.i != 0:
                attr.i = 0
                changed += 1
        dropped = list(node.output[1:])
        if any(name in graph_outputs for name in dropped if name):
            raise ValueError("node %s: its running statistics are graph outputs" % node.name)
        del node.output[1:]
    return m, changed


class Report:
    def __init__(self, rtol, atol):
        self.rtol, self.atol, self.failures = rtol, atol, []

    def check(self, label, ok, detail=""):
        print("  %-76s %s%s" % (label, "ok" if ok else "FAIL", ("  " + detail) if detail else ""))
        if not ok:
            self.failures.append(label)

    def compare(self, label, ours, reference):
        if ours.shape != reference.shape:
            self.check(label, False, "shapes %s vs %s" % (ours.shape, reference.shape))
            return
        diff = np.abs(ours.astype(np.float64) - reference.astype(np.float64))
        rel = diff / np.maximum(np.abs(reference.astype(np.float64)), 1e-6)
        ok = bool(np.all(diff <= self.atol + self.rtol * np.abs(reference))) and bool(np.all(np.isfinite(ours)))
        self.check(label, ok, "max abs diff %.3g, max rel diff %.3g (max |logit| %.3g)" %
                   (diff.max(), rel.max(), np.abs(reference).max()))


def ort_logits(path, input_name, x):
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, {input_name: x})[0]


def onnxtrain_logits(binary, path, x, workdir, tag):
    x_path = os.path.join(workdir, tag + "_input.npy")
    out_dir = os.path.join(workdir, tag + "_out")
    np.save(x_path, x)
    run([binary, "run", path, "-i", x_path, "-o", out_dir])
    return np.load(os.path.join(out_dir, "logits.npy"))


def torch_eval_logits(name, model, x):
    """The torch module with the trained weights and running statistics, eval(); None without torch."""
    try:
        import torch
        sys.path.insert(0, MODELS)
        import make_fixtures
    except ImportError:
        return None
    module = make_fixtures.build(name)
    weights = initializers(model)
    state = module.state_dict()
    module.load_state_dict({k: torch.from_numpy(weights[k].copy()) for k in state if k in weights}, strict=False)
    module.eval()
    with torch.no_grad():
        return module(torch.from_numpy(x)).numpy()


def check_fixture(binary, name, args, workdir, report):
    (c, h, w), batch = FIXTURES[name]
    source = os.path.join(MODELS, name + "_opset17.onnx")
    trained_path = os.path.join(workdir, name + "_trained.onnx")
    print("%s: onnxtrain train %d steps of batch %d" % (name, args.steps, batch))
    out = run([binary, "train", source, "--data", "synthetic:%d,%d,%d:10:%d" % (c, h, w, batch * args.steps),
               "--batch", str(batch), "--epochs", "1", "--limit-batches", str(args.steps), "--validation", "0",
               "--lr", str(args.lr), "--seed", "0", "-o", trained_path])
    if args.verbose:
        print(out)

    original, trained = onnx.load(source), onnx.load(trained_path)
    try:
        onnx.checker.check_model(trained, full_check=True)
        report.check("onnx.checker (full_check, onnx %s)" % onnx.__version__, True)
    except Exception as e:  # the checker raises several exception types
        report.check("onnx.checker (full_check, onnx %s)" % onnx.__version__, False, str(e).splitlines()[0])
    before, after = initializers(original), initializers(trained)
    report.check("same initializer names", sorted(before) == sorted(after))
    changed = sorted(k for k in before if k in after and not np.array_equal(before[k], after[k]))
    stats = [k for k in before if k.endswith("running_mean") or k.endswith("running_var")]
    params = [k for k in before if k not in stats and before[k].dtype == np.float32 and not k.endswith("num_batches_tracked")]
    report.check("every float parameter changed by training",
                 all(k in changed for k in params), "%d of %d" % (sum(k in changed for k in params), len(params)))
    if stats:
        report.check("every BatchNorm running statistic changed",
                     all(k in changed for k in stats), "%d of %d" % (sum(k in changed for k in stats), len(stats)))
        variances = [after[k] for k in stats if k.endswith("running_var")]
        report.check("running variances positive and finite", all(np.all(np.isfinite(v) & (v > 0)) for v in variances))

    input_name = trained.graph.input[0].name
    x = np.random.default_rng(args.seed).standard_normal((args.eval_batch, c, h, w)).astype(np.float32)
    ours = onnxtrain_logits(binary, trained_path, x, workdir, name)
    theirs = ort_logits(trained_path, input_name, x)
    mode = " (as written: BN in inference mode)" if stats else ""
    report.compare("onnxtrain run vs onnxruntime %s%s" % (ort.__version__, mode), ours, theirs)

    if stats:
        evaluation, flipped = eval_copy(trained)
        report.check("the written model is in inference mode already (no BN node to flip)", flipped == 0,
                     "%d flipped" % flipped)
        eval_path = os.path.join(workdir, name + "_trained_eval.onnx")
        onnx.save(evaluation, eval_path)
        onnx.checker.check_model(evaluation, full_check=True)
        ours_eval = onnxtrain_logits(binary, eval_path, x, workdir, name + "_eval")
        theirs_eval = ort_logits(eval_path, input_name, x)
        report.compare("eval copy (%d BN nodes training_mode=0): onnxtrain vs ort" % flipped, ours_eval, theirs_eval)
        torch_logits = torch_eval_logits(name, trained, x)
        if torch_logits is not None:
            import torch
            report.compare("eval copy: onnxtrain vs torch %s eval()" % torch.__version__, ours_eval, torch_logits)
        print("  (eval-mode logits differ from the batch-statistics ones by up to %.3g: the running statistics "
              "are in use)" % np.abs(ours_eval - ours).max())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="onnxtrain build folder (default build/)")
    p.add_argument("--models", default="cnn,resnet", help="comma-separated, of %s" % ", ".join(FIXTURES))
    p.add_argument("--steps", type=int, default=5, help="training steps (default 5)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--eval-batch", type=int, default=8, help="rows of the compared input batch (default 8)")
    p.add_argument("--seed", type=int, default=3, help="seed of the compared input batch")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--atol", type=float, default=1e-5)
    p.add_argument("--keep", help="write the trained models, inputs and outputs here instead of a temporary folder")
    p.add_argument("-v", "--verbose", action="store_true", help="show onnxtrain train's output")
    args = p.parse_args()

    binary = find_onnxtrain(os.path.abspath(args.build))
    names = args.models.split(",")
    for name in names:
        if name not in FIXTURES:
            sys.exit("unknown model %s (one of %s)" % (name, ", ".join(FIXTURES)))
    report = Report(args.rtol, args.atol)
    print("onnxtrain %s; onnxruntime %s; onnx %s; tolerance |diff| <= %g + %g*|ort|" %
          (binary, ort.__version__, onnx.__version__, args.atol, args.rtol))
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        for name in names:
            check_fixture(binary, name, args, args.keep, report)
    else:
        with tempfile.TemporaryDirectory(prefix="ortcheck_") as workdir:
            for name in names:
                check_fixture(binary, name, args, workdir, report)
    if report.failures:
        print("FAILED: %s" % "; ".join(report.failures))
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
