#!/usr/bin/env python3
"""benchmarks/compare_pytorch.py's GEMM peak: the best of every sample per thread count (torch.mm's and
oneDNN sgemm's, before every configuration), and BUILD/benchmarks/gemm_peak's JSON line as the script reads
it. Needs no torch: the script imports it only in its worker.

    python3 tests/compare_pytorch_peak_test.py --gemm-peak build/release/benchmarks/gemm_peak
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import compare_pytorch  # noqa: E402


def check(condition, message):
    if not condition:
        sys.exit("FAIL: " + message)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gemm-peak", required=True, help="the built benchmarks/gemm_peak")
    args = p.parse_args()

    peaks, samples = {}, {}
    compare_pytorch.record_peak_samples(peaks, samples, 1, [{"gflops": 85.0, "by": "torch.mm"},
                                                            {"gflops": 107.9, "by": "oneDNN sgemm"}])
    compare_pytorch.record_peak_samples(peaks, samples, 1, [{"gflops": 60.0, "by": "torch.mm"}])
    compare_pytorch.record_peak_samples(peaks, samples, 2, [{"gflops": 150.0, "by": "torch.mm"}])
    check(peaks[1]["gflops"] == 107.9 and peaks[1]["by"] == "oneDNN sgemm",
          "the 1-thread peak is the best sample, not the last: %s" % peaks[1])
    check(samples[1] == [85.0, 107.9, 60.0], "every 1-thread sample is kept in order: %s" % samples[1])
    check(peaks[2]["gflops"] == 150.0 and samples[2] == [150.0], "thread counts are apart: %s" % peaks)

    # The tool's line, read as the script reads it, on 1 thread: 2 n^3 repetitions / seconds.
    env = dict(os.environ, OMP_NUM_THREADS="1")
    line = json.loads(subprocess.run([args.gemm_peak, "128", "0.05"], env=env, check=True, capture_output=True,
                                     text=True).stdout)
    check(line["n"] == 128 and line["threads"] == 1 and line["repetitions"] >= 1, "gemm_peak's line: %s" % line)
    expected = 2.0 * 128 ** 3 * line["repetitions"] / line["seconds"] / 1e9
    check(abs(line["gflops"] - expected) <= 1e-3 * expected, "gflops is 2 n^3 reps / s: %s" % line)
    bad = subprocess.run([args.gemm_peak, "0"], env=env, capture_output=True, text=True)
    check(bad.returncode == 2 and "usage" in bad.stderr, "a bad N is refused with the usage: %s" % bad.stderr)
    print("compare_pytorch peak: OK")


if __name__ == "__main__":
    main()
