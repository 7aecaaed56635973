// What compute backends this build has and what the machine offers: oneDNN's version, threading
// runtime and the CPU instruction set it dispatches to, and whether CUDA was compiled in with the
// visible GPUs. For `onnxtrain` version/diagnostic output and for tests that skip without a GPU.
//
//   BackendInfo info = query_backend_info();
//   std::cout << format_backend_info(info);
//   if (info.cuda.devices.empty()) GTEST_SKIP() << info.cuda.unavailable_reason;
#pragma once

#include <string>

#include "kernels/cuda/device_query.h"

namespace onnxtrain {

struct BackendInfo {
  std::string onednn_version;      // "2.6.3" (dnnl_version())
  std::string onednn_git_hash;     // may be empty or "N/A"
  std::string onednn_cpu_runtime;  // "OpenMP", "TBB", "sequential", "threadpool"
  std::string cpu_isa;             // oneDNN's effective ISA: "avx2", "avx512_core", ...
  unsigned cpu_threads = 0;        // std::thread::hardware_concurrency()
  cuda::CudaQuery cuda;            // compiled flag, versions, devices or the reason there are none
};

// Whether oneDNN computes bfloat16 natively on this CPU (its ISA is avx512_core_bf16 or avx512_core_amx:
// AVX-512 BF16 or AMX). Then --precision bf16 runs Conv, ConvGrad, Gemm and MatMul on oneDNN's bfloat16
// primitives; else on onnxtrain's reference loops.
bool cpu_has_native_bf16();

// Queries once per call; cheap (no kernels run), never throws for a missing GPU or driver.
BackendInfo query_backend_info();

// Multi-line, human-readable summary:
//   oneDNN 2.6.3 (OpenMP), CPU ISA avx2, 2 threads
//   CUDA compiled (toolkit 13.0.88, runtime 13.0, driver none): no CUDA device visible (...)
std::string format_backend_info(const BackendInfo& info);

}  // namespace onnxtrain
