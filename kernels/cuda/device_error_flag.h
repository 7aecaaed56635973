// Bad data a CUDA kernel can only see on the device: a Gather index or a loss label out of range, Slice or
// Pad arguments that disagree with the sizes fixed at prepare. Device code cannot throw, and run() never
// synchronises, so the kernel records a code in mapped page-locked host memory and the next run() of the
// same kernel throws Error naming it (the executor synchronises after every run, so the flag is settled
// by then). The faulty run's output is left zero (Gather), unwritten (Slice, Pad) or NaN (losses); the
// throw clears the flag.
//
//   DeviceErrorFlag flag_;                                  // a kernel member, made at prepare
//   flag_.throw_if_raised(spec_, describe_code);            // first thing in run(): an earlier run's fault
//   my_kernel<<<...>>>(..., flag_.device_ptr());            // device code: raise_flag(flag, code)
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/kernel.h"
#include "kernels/reference/kernel_plumbing.h"

namespace onnxtrain::cuda {

class DeviceErrorFlag {
 public:
  DeviceErrorFlag() {
    ONNXTRAIN_CUDA_CHECK(
        cudaHostAlloc(reinterpret_cast<void**>(&host_), sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
    *host_ = 0;
    ONNXTRAIN_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), host_, 0));
  }
  ~DeviceErrorFlag() { static_cast<void>(cudaFreeHost(host_)); }
  DeviceErrorFlag(const DeviceErrorFlag&) = delete;
  DeviceErrorFlag& operator=(const DeviceErrorFlag&) = delete;

  int* device_ptr() const { return device_; }
  // Throws Error (code -> `describe(code)`) when device code raised the flag; clears it first.
  template <typename Describe>
  void throw_if_raised(const KernelSpec& spec, Describe&& describe) {
    const int code = *static_cast<volatile int*>(host_);
    if (code == 0) return;
    *static_cast<volatile int*>(host_) = 0;
    reference::kernel_fail(spec, "an earlier run on the GPU found " + std::string(describe(code)));
  }

 private:
  int* host_ = nullptr;
  int* device_ = nullptr;
};

#if defined(__CUDACC__)
// Sets the flag from any thread. A plain volatile store, not an atomic (atomics on mapped host memory are
// not guaranteed over every interconnect): concurrent writers race benignly, each code names a real fault.
__device__ inline void raise_flag(int* flag, int code) { *static_cast<volatile int*>(flag) = code; }
#endif

}  // namespace onnxtrain::cuda
