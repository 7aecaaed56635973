// CUDA device discovery that is safe on any machine: with no GPU or no driver it returns an empty
// device list and says why, it never aborts. Plain C++ (no CUDA headers), so CPU-only code may include
// it; with CUDA off, the stub (device_query_stub.cc) answers "CUDA support not compiled in".
//
//   cuda::CudaQuery q = cuda::query_devices();
//   if (q.devices.empty()) std::cout << "CUDA unavailable: " << q.unavailable_reason << "\n";
//   for (const auto& d : q.devices) std::cout << d.name << " sm_" << d.compute_capability_major <<
//   d.compute_capability_minor;
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace onnxtrain::cuda {

struct CudaDeviceProperties {
  int index = 0;
  std::string name;                  // "NVIDIA H200"
  int compute_capability_major = 0;  // 9 for Hopper
  int compute_capability_minor = 0;
  std::uint64_t total_memory_bytes = 0;
  int multiprocessor_count = 0;
  std::string pci_bus_id;  // "0000:19:00.0"
};

struct CudaQuery {
  bool compiled = false;        // CUDA support was built in
  std::string toolkit_version;  // the toolkit compiled against, "13.0.88"; "" when not compiled
  int runtime_version = 0;      // cudaRuntimeGetVersion: 13000 = 13.0
  int driver_version = 0;       // cudaDriverGetVersion: the newest CUDA the driver supports; 0 = no driver
  std::string cudnn_version;    // cudnnGetVersion() of the loaded library, "9.19.0"; "" when not linked
  std::string cublas_version;   // cublasGetProperty of the loaded library, "13.0.0"
  std::vector<CudaDeviceProperties> devices;
  std::string unavailable_reason;  // why `devices` is empty; "" when there are devices
};

// Lists the visible CUDA devices (respects CUDA_VISIBLE_DEVICES). Never throws for a missing GPU or driver.
CudaQuery query_devices();

// Runs a one-thread kernel on `device` and reads its result back. Returns "" on success, else what
// failed (no kernel image for the device's architecture, launch error, ...). Needs a visible GPU.
std::string run_smoke_kernel(int device);

// "13.0" from 13000 (the encoding of cudaRuntimeGetVersion / cudaDriverGetVersion).
std::string format_cuda_version(int version);

}  // namespace onnxtrain::cuda
