// The local CPU as a DeviceDescription, measured at start: float32 FLOP/s from onnxtrain's own MatMul
// kernel (oneDNN) on a 512×512×512 product, memory bandwidth from its Relu kernel streaming 64 MiB in and
// out, the per-kernel overhead from a 16-element Relu and a recurrent step's from an LSTM of 16 units: each the best of
// a few runs (a busy machine makes some runs wait for a core), about 0.2 s in all. Measuring with the kernels the
// executor runs keeps the analytic times in their units. Part of onnxtrain_partitioner_profile (it needs the kernels
// library).
//
//   CpuProbe probe = probe_local_cpu();
//   std::printf("%.1f GFLOP/s, %.1f GB/s\n", probe.gemm_flops / 1e9, probe.memory_bandwidth / 1e9);
//   DeviceDescription cpu = describe_local_cpu(probe);   // or measure_local_cpu()
#pragma once

#include <string>

#include "partitioner/device.h"

namespace onnxtrain {

struct CpuProbe {
  double gemm_flops = 0;         // FLOP/s of the MatMul kernel, best run
  double memory_bandwidth = 0;   // bytes/s read + written by the Relu kernel, best run
  double kernel_overhead_s = 0;  // one call of a 16-element Relu kernel, best run
  double step_overhead_s = 0;    // a step of an LSTM of 16 units, batch 16, as training runs it, best run
  int threads = 0;               // OpenMP threads the kernels use
  // The 16-element kernel's best run took over 100 µs: the kernels' threads waited for cores that other
  // processes hold, and every figure here is low by an unknown factor. Worth a warning to the user
  // (run on a quiet machine, or with OMP_NUM_THREADS below the free cores).
  bool busy = false;
  std::string cpu_isa;       // oneDNN's dispatch ISA ("avx2")
  double probe_seconds = 0;  // how long the probe took
};

CpuProbe probe_local_cpu();

// Bytes/s read + written by the Relu kernel over 64 MiB on `threads` OpenMP threads (the probe's figure
// is on all of them). One thread reaches well under half of two on this kind of machine (12 against
// 38 GB/s on the 2-core Xeon): what a pipeline stage's optimizer step, on its stage's one thread, gets.
double measure_memory_bandwidth(int threads);

// The probe's figures as a device: compute efficiency 0.7 (Conv and small GEMMs reach less than the
// probe's large GEMM), memory efficiency 1 (measured with a kernel), memory size from the OS; the link is
// shared memory between threads: half the measured traffic rate (a copy reads and writes), 1 µs latency.
// The kernel overhead is capped at 20 µs and the step's at 60 µs, so that a probe on a busy machine does not
// make every node cost milliseconds.
DeviceDescription describe_local_cpu(const CpuProbe& probe);
DeviceDescription measure_local_cpu();

}  // namespace onnxtrain
