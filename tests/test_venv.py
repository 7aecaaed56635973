"""The Python tests' interpreter: build/ort-venv (made by tools/setup-ort.sh: onnxruntime, numpy,
tensorboard from the Python package index). A test imports this module first and calls
`use_test_venv(["numpy", "onnxruntime"])`: when a module is not importable, the script runs itself again
with the venv's interpreter, or exits naming the setup script."""
import importlib
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_PY = os.path.join(ROOT, "build", "ort-venv", "bin", "python")


def use_test_venv(modules):
    try:
        for name in modules:
            importlib.import_module(name)
    except ImportError as e:
        if not os.environ.get("ONNXTRAIN_ORT_REEXEC") and os.path.exists(VENV_PY):
            os.environ["ONNXTRAIN_ORT_REEXEC"] = "1"
            os.execv(VENV_PY, [VENV_PY] + sys.argv)
        sys.exit("%s: %s: run tools/setup-ort.sh (it makes %s with %s)" % (sys.argv[0], e, VENV_PY, ", ".join(modules)))
