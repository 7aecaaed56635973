"""Where the repository's scripts find the onnxtrain binary (standard library only)."""
import os
import sys


def find_onnxtrain(build, binary=None):
    """`binary` when given (an executable anywhere: tools/gpu-check.sh passes the one of its prebuilt
    bundle, a wrapper that sets its library path); else DIR/tools/onnxtrain (a build folder) or
    DIR/release/tools/onnxtrain (build/ holding the presets' folders), the newer when both exist, since a
    stale one may lack the options used here."""
    if binary:
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            sys.exit("--binary %s: not an executable file" % binary)
        return os.path.abspath(binary)
    found = [os.path.join(build, rel) for rel in ("tools/onnxtrain", "release/tools/onnxtrain")]
    found = [path for path in found if os.path.isfile(path) and os.access(path, os.X_OK)]
    if found:
        return max(found, key=os.path.getmtime)
    sys.exit("no onnxtrain binary under %s (tools/onnxtrain or release/tools/onnxtrain): build the "
             "'onnxtrain' target and pass --build DIR" % build)
