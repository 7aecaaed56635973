#!/usr/bin/env python3
"""Builds the seed corpus of each fuzz target (fuzz/) in OUT/<target>/, from files already in the
repository and tiny generated ones. Python's standard library only (no numpy, no onnx): the .onnx
seeds are encoded by hand (a few protobuf fields), the checkpoints and plans follow the formats that
executor/checkpoint.h and partitioner/plan_io.h describe.

  fuzz/make_corpus.py build/fuzz/corpus            # then: build/fuzz/fuzz/fuzz_npy build/fuzz/corpus/fuzz_npy

Files over 1 MB are skipped (the loaders' limits are found by mutation, not by big seeds). The
minimised inputs of past findings (tests/data/fuzz/<target>/) are seeds too. Existing files in OUT
are kept: a corpus that earlier runs grew stays.
"""
import gzip
import hashlib
import io
import json
import os
import struct
import sys
import zipfile
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_SEED_BYTES = 1 << 20

TARGETS = ["fuzz_model_bytes", "fuzz_model_proto", "fuzz_npy", "fuzz_npz", "fuzz_idx", "fuzz_cifar",
           "fuzz_tokens", "fuzz_checkpoint", "fuzz_plan"]


# --- protobuf, just enough for ONNX models ---------------------------------------------------------

def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def f_int(field, v):
    return varint(field << 3) + varint(v)


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return varint(field << 3 | 2) + varint(len(b)) + b


def f_float(field, v):
    return varint(field << 3 | 5) + struct.pack("<f", v)


FLOAT, INT64 = 1, 7


def tensor(name, dims, values=None, dtype=FLOAT, external=None):
    b = b"".join(f_int(1, d) for d in dims) + f_int(2, dtype) + f_bytes(8, name)
    if external is not None:
        b += b"".join(f_bytes(13, f_bytes(1, k) + f_bytes(2, v)) for k, v in external) + f_int(14, 1)
    else:
        fmt = "<%d%s" % (len(values), "f" if dtype == FLOAT else "q")
        b += f_bytes(9, struct.pack(fmt, *values))
    return b


def value_info(name, dims, elem=FLOAT):
    dim_msgs = b"".join(f_bytes(1, f_bytes(2, d) if isinstance(d, str) else f_int(1, d)) for d in dims)
    tensor_type = f_int(1, elem) + f_bytes(2, dim_msgs)
    return f_bytes(1, name) + f_bytes(2, f_bytes(1, tensor_type))


def attr_int(name, v):
    return f_bytes(1, name) + f_int(3, v) + f_int(20, 2)


def attr_ints(name, vs):
    return f_bytes(1, name) + b"".join(f_int(8, v) for v in vs) + f_int(20, 7)


def attr_float(name, v):
    return f_bytes(1, name) + f_float(2, v) + f_int(20, 1)


def attr_tensor(name, t):
    return f_bytes(1, name) + f_bytes(5, t) + f_int(20, 4)


def node(op, inputs, outputs, name, attrs=(), domain=None):
    b = b"".join(f_bytes(1, i) for i in inputs) + b"".join(f_bytes(2, o) for o in outputs)
    b += f_bytes(3, name) + f_bytes(4, op) + b"".join(f_bytes(5, a) for a in attrs)
    if domain is not None:
        b += f_bytes(7, domain)
    return b


def model(nodes, inputs, outputs, initializers=(), opset=13, ir=7, functions=(), extra_opsets=()):
    g = b"".join(f_bytes(1, n) for n in nodes) + f_bytes(2, "g")
    g += b"".join(f_bytes(5, t) for t in initializers)
    g += b"".join(f_bytes(11, v) for v in inputs) + b"".join(f_bytes(12, v) for v in outputs)
    m = f_int(1, ir) + f_bytes(2, "onnxtrain-fuzz") + f_bytes(7, g) + f_bytes(8, f_int(2, opset))
    m += b"".join(f_bytes(8, f_bytes(1, d) + f_int(2, v)) for d, v in extra_opsets)
    m += b"".join(f_bytes(25, f) for f in functions)
    return m


def tiny_models():
    x = value_info("x", ["batch", 4])
    y = value_info("y", ["batch", 3])
    w = tensor("w", [3, 4], [0.1 * i for i in range(12)])
    b = tensor("b", [3], [0.0, 0.5, -0.5])
    gemm = node("Gemm", ["x", "w", "b"], ["y"], "fc", [attr_int("transB", 1)])
    yield "relu", model([node("Relu", ["x"], ["y"], "relu")], [value_info("x", [2])], [value_info("y", [2])])
    yield "relu_opset7", model([node("Relu", ["x"], ["y"], "relu")], [value_info("x", [2])], [value_info("y", [2])], opset=7, ir=3)
    yield "gemm", model([gemm], [x], [y], [w, b])
    yield "gemm_opset21", model([gemm], [x], [y], [w, b], opset=21, ir=10)
    ext = tensor("w", [3, 4], external=[("location", "weights.bin"), ("offset", "64"), ("length", "48")])
    yield "gemm_external", model([gemm], [x], [y], [ext, b])
    # Conv -> BatchNorm -> Relu -> GlobalAveragePool -> Flatten -> Gemm, on (N,1,4,4)
    xi = value_info("x", ["batch", 1, 4, 4])
    conv_w = tensor("conv.w", [2, 1, 3, 3], [0.05 * i for i in range(18)])
    bn = [tensor("bn." + n, [2], v) for n, v in (("scale", [1, 1]), ("bias", [0, 0]), ("mean", [0, 0]), ("var", [1, 1]))]
    fc_w = tensor("fc.w", [3, 2], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    nodes = [node("Conv", ["x", "conv.w"], ["c"], "conv", [attr_ints("kernel_shape", [3, 3]), attr_ints("pads", [1, 1, 1, 1])]),
             node("BatchNormalization", ["c", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["n"], "bn", [attr_float("epsilon", 1e-5)]),
             node("Relu", ["n"], ["r"], "relu"), node("GlobalAveragePool", ["r"], ["p"], "pool"),
             node("Flatten", ["p"], ["f"], "flatten", [attr_int("axis", 1)]),
             node("Gemm", ["f", "fc.w"], ["y"], "fc", [attr_int("transB", 1)])]
    yield "cnn", model(nodes, [xi], [y], [conv_w, *bn, fc_w])
    # Reshape with a Constant shape, Transpose, Softmax: constant folding and shape ops
    shape = tensor("shape", [2], [0, -1], dtype=INT64)
    nodes = [node("Constant", [], ["s"], "const", [attr_tensor("value", shape)]),
             node("Reshape", ["x", "s"], ["r"], "reshape"), node("Transpose", ["r"], ["t"], "transpose", [attr_ints("perm", [1, 0])]),
             node("Softmax", ["t"], ["y"], "softmax", [attr_int("axis", -1)])]
    yield "reshape_softmax", model(nodes, [value_info("x", [2, 2, 2])], [value_info("y", [4, 2])])
    # A model-local function called once: inlining
    fn = (f_bytes(1, "Double") + f_bytes(4, "x") + f_bytes(5, "y") +
          f_bytes(7, node("Add", ["x", "x"], ["y"], "add")) + f_bytes(9, f_int(2, 13)) + f_bytes(10, "local"))
    yield "function", model([node("Double", ["x"], ["y"], "call", domain="local")], [value_info("x", [2])],
                            [value_info("y", [2])], functions=[fn], extra_opsets=[("local", 1)])


# --- .npy / .npz ------------------------------------------------------------------------------------

def npy(descr, shape, payload, version=1, fortran=False):
    shape_text = "(" + "".join("%d," % s for s in shape) + ")" if len(shape) == 1 else "(" + ", ".join(map(str, shape)) + ")"
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, "True" if fortran else "False", shape_text)
    prefix = 10 if version == 1 else 12
    header += " " * ((64 - (prefix + len(header) + 1) % 64) % 64) + "\n"
    size = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + size + header.encode("latin-1") + payload


def tiny_npys():
    yield "f4_2x3", npy("<f4", (2, 3), struct.pack("<6f", *range(6)))
    yield "f8_scalar", npy("<f8", (), struct.pack("<d", 1.5))
    yield "i8_5", npy("<i8", (5,), struct.pack("<5q", 0, 1, 2, 3, 4))
    yield "u1_2x2x2_v2", npy("|u1", (2, 2, 2), bytes(range(8)), version=2)
    yield "i4_v3", npy("<i4", (3,), struct.pack("<3i", 7, 8, 9), version=3)
    yield "u2_4", npy("<u2", (4,), struct.pack("<4H", 1, 2, 3, 65535))
    yield "f2_2", npy("<f2", (2,), b"\x00\x3c\x00\x40")
    yield "b1_3", npy("|b1", (3,), b"\x01\x00\x01")
    yield "empty_0x4", npy("<f4", (0, 4), b"")
    yield "fortran", npy("<f4", (2, 2), bytes(16), fortran=True)


def npz(arrays, compressed):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED) as z:
        for name, data in arrays:
            z.writestr(zipfile.ZipInfo(name + ".npy", date_time=(2026, 12, 2, 0, 0, 0)), data,
                       compress_type=zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED)
    return buf.getvalue()


def tiny_npzs():
    x = npy("<f4", (4, 3), struct.pack("<12f", *[i / 10 for i in range(12)]))
    y = npy("<i8", (4,), struct.pack("<4q", 0, 1, 2, 1))
    yield "xy_stored", npz([("x", x), ("y", y)], False)
    yield "xy_deflated", npz([("x", x), ("y", y)], True)
    images = npy("|u1", (2, 1, 2, 2), bytes(range(8)))
    yield "keras_layout", npz([("x_train", images), ("y_train", npy("|u1", (2,), b"\x00\x01")),
                               ("x_test", images), ("y_test", npy("|u1", (2,), b"\x01\x00"))], True)
    ids = npy("<i4", (2, 3), struct.pack("<6i", 1, 2, 3, 4, 5, 6))
    yield "tokens", npz([("input_ids", ids), ("labels", npy("<i8", (2, 3), struct.pack("<6q", 2, 3, 4, 5, 6, -100)))], False)
    yield "input_name", npz([("input", x), ("labels", y)], False)


# --- IDX, CIFAR-10, token streams -------------------------------------------------------------------

def idx(dims, payload):
    return struct.pack(">BBBB", 0, 0, 8, len(dims)) + b"".join(struct.pack(">I", d) for d in dims) + payload


def gz(data):
    return gzip.compress(data, mtime=0)


def tiny_idx():
    images = idx([3, 4, 4], bytes(i % 256 for i in range(48)))
    labels = idx([3], b"\x00\x01\x09")
    yield "images", images
    yield "labels", labels
    yield "images_gz", gz(images)
    yield "labels_gz", gz(labels)
    yield "empty_images", idx([0, 28, 28], b"")
    fashion = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"
    if os.path.exists(fashion):
        data = gzip.decompress(open(fashion, "rb").read())
        yield "fashion_labels_20", idx([20], data[8:28])


def tiny_cifar():
    record = lambda label: bytes([label]) + bytes(i * 7 % 256 for i in range(3072))
    yield "one", record(3)
    yield "two", record(0) + record(9)
    yield "bad_label", record(10)


def tiny_tokens():
    yield "npy_i8", npy("<i8", (20,), struct.pack("<20q", *[i * 3 % 50 for i in range(20)]))
    yield "npy_u2", npy("<u2", (12,), struct.pack("<12H", *range(12)))
    yield "npy_i4_2d", npy("<i4", (2, 6), struct.pack("<12i", *range(12)))
    yield "bin_u16", struct.pack("<16H", *[i * 1000 for i in range(16)])
    yield "text", b"\x05hello fuzzing world, one token per byte\n"


# --- checkpoints and plans --------------------------------------------------------------------------

def checkpoint(tensors, shards=None, step=1, config=None):
    entries, data, offset = [], b"", 0
    for name, section, dtype, sizes, payload in tensors:
        entries.append({"name": name, "section": section, "dtype": dtype, "sizes": sizes, "offset": offset,
                        "bytes": len(payload), "crc32": zlib.crc32(payload)})
        data += payload
        offset += len(payload)
    header = {"format": "onnxtrain training checkpoint", "step": step, "next_epoch": 0, "next_batch": 3, "seed": 42,
              "config": config if config is not None else {"optimizer": "sgd", "lr": 0.01, "batch": 8},
              "data_bytes": offset, "tensors": entries}
    if shards is not None:
        header["shards"] = shards
    text = json.dumps(header).encode()
    return (b"ONNXTRAINCKPT\0" + struct.pack("<IQ", 1, len(text)) + text + struct.pack("<I", zlib.crc32(text)) + data)


def tiny_checkpoints():
    w = ("fc.weight", "param", "float32", [2, 3], struct.pack("<6f", *range(6)))
    b = ("fc.bias", "param", "float32", [2], struct.pack("<2f", 0.5, -0.5))
    step = ("global_step", "optimizer", "int64", [], struct.pack("<q", 7))
    m = ("fc.weight/momentum", "optimizer", "float32", [2, 3], bytes(24))
    p = ("fc.weight/average", "predictor", "float32", [2, 3], bytes(24))
    yield "params", checkpoint([w, b])
    yield "with_optimizer", checkpoint([w, b, step, m, p])
    yield "empty", checkpoint([])
    yield "zero_size", checkpoint([("e", "param", "float16", [0, 4], b"")])
    # fuzz_checkpoint.cc writes this shard next to the input
    yield "manifest", checkpoint([], shards=["checkpoint-00000001.otck.shards/rank-00000.otck"], config={"lr": 0.01})


def plan(stages_nodes, names):
    stages, first = [], 0
    for k, count in enumerate(stages_nodes):
        end = first + count
        stages.append({"index": k, "first_node": first, "end_node": end, "first_name": names[first],
                       "last_name": names[end - 1], "replicas": 1, "devices": [k], "weight_versions": 1,
                       "in_flight": 1, "parameter_bytes": 4096, "flops": 1.5e6, "compute_seconds": 1e-3,
                       "send_forward_seconds": 1e-5, "send_backward_seconds": 1e-5, "allreduce_seconds": 0.0,
                       "time_seconds": 1.02e-3, "idle_fraction": 0.1, "bytes_sent_forward": 1024,
                       "bytes_sent_backward": 1024,
                       "memory": {"weights": 4096, "stashed_weights": 0, "gradients": 4096, "optimizer_state": 4096,
                                  "state": 0, "activations": 8192, "in_transit": 0, "total": 20480},
                       "fits_memory_cap": True})
        first = end
    link = {"name": "pcie4", "bandwidth": 2.5e10, "latency_s": 5e-6}
    doc = {"format": "onnxtrain-plan", "version": 1, "model": "mlp", "device": "cpu", "batch": 64, "nodes": names,
           "user_split": False,
           "options": {"stages": len(stages), "schedule": "gpipe", "micro_batches": 4, "replicas": [], "devices": 0,
                       "link": link, "allreduce_link": link, "optimizer_slots": 1, "prediction_average": False,
                       "prediction_metrics": False, "memory_cap": 0},
           "stages": stages,
           "predicted": {"bottleneck_seconds": 1e-3, "single_device_seconds": 2e-3, "makespan_seconds": 5e-3,
                         "throughput": 1000.0, "steady_throughput": 1100.0, "single_device_throughput": 600.0,
                         "speedup": 1.6, "steady_speedup": 1.8, "bubble_fraction": 0.2, "utilisation": 0.8,
                         "balance": 0.9, "fits_memory_cap": True}}
    return (json.dumps(doc, indent=2) + "\n").encode()


def tiny_plans():
    names = ["fc1", "relu1", "fc2", "relu2", "fc3"]
    yield "one_stage", plan([5], names)
    yield "two_stages", plan([2, 3], names)
    yield "five_stages", plan([1, 1, 1, 1, 1], names)


# --- files from the repository ----------------------------------------------------------------------

def repo_files(folders, suffixes, limit=None):
    found = []
    for folder in folders:
        for base, dirs, files in os.walk(os.path.join(ROOT, folder)):
            dirs[:] = sorted(d for d in dirs if d != "zoo")
            for f in sorted(files):
                path = os.path.join(base, f)
                if f.endswith(suffixes) and os.path.getsize(path) <= MAX_SEED_BYTES:
                    found.append(path)
    return found[:limit] if limit else found


def seeds(target):
    """(name, bytes) pairs for one target."""
    if target in ("fuzz_model_bytes", "fuzz_model_proto"):
        for path in repo_files(["models", "tests/data"], (".onnx",)):
            yield os.path.relpath(path, ROOT), open(path, "rb").read()
        yield from tiny_models()
    elif target == "fuzz_npy":
        # Every dtype and rank the fixtures hold, not their 300 copies: one file per folder.
        folders = {}
        for path in repo_files(["tests/data", "models/expected"], (".npy",)):
            folders.setdefault(os.path.dirname(path), path)
        for path in folders.values():
            yield os.path.relpath(path, ROOT), open(path, "rb").read()
        yield from tiny_npys()
    elif target == "fuzz_npz":
        for path in repo_files(["tests/data"], (".npz",)):
            yield os.path.relpath(path, ROOT), open(path, "rb").read()
        yield from tiny_npzs()
    elif target == "fuzz_idx":
        yield from tiny_idx()
    elif target == "fuzz_cifar":
        yield from tiny_cifar()
    elif target == "fuzz_tokens":
        yield from tiny_tokens()
    elif target == "fuzz_checkpoint":
        yield from tiny_checkpoints()
    elif target == "fuzz_plan":
        yield from tiny_plans()
    regressions = os.path.join(ROOT, "tests", "data", "fuzz", target)
    if os.path.isdir(regressions):
        for f in sorted(os.listdir(regressions)):
            yield "regression " + f, open(os.path.join(regressions, f), "rb").read()


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: fuzz/make_corpus.py OUT_DIR")
    out = sys.argv[1]
    for target in TARGETS:
        folder = os.path.join(out, target)
        os.makedirs(folder, exist_ok=True)
        count = 0
        for name, data in seeds(target):
            if len(data) > MAX_SEED_BYTES:
                continue
            # libFuzzer names corpus files by content hash; so do we, so that reruns add nothing twice.
            path = os.path.join(folder, hashlib.sha1(data).hexdigest())
            if not os.path.exists(path):
                with open(path, "wb") as f:
                    f.write(data)
            count += 1
        print("make_corpus: %-17s %3d seeds -> %s" % (target, count, folder))


if __name__ == "__main__":
    main()
