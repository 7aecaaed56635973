// The CUDA side of the device query: the first translation unit nvcc compiles, so every build with
// CUDA on proves the toolchain, cudart, cuBLAS and cuDNN link path.
#include <cublas_api.h>
#include <cuda_runtime.h>

#include "kernels/cuda/device_query.h"
#if ONNXTRAIN_HAVE_CUDNN
#include <cudnn.h>
#endif

#include <string>

namespace onnxtrain::cuda {
namespace {

std::string cuda_error_text(const char* call, cudaError_t err) {
  return std::string(call) + " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}

// Writes `value` to `out`: the smallest proof that device code for this GPU's architecture is in the
// binary and runs.
__global__ void write_value_kernel(int* out, int value) { *out = value; }

}  // namespace

std::string format_cuda_version(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

CudaQuery query_devices() {
  CudaQuery q;
  q.compiled = true;
#ifdef ONNXTRAIN_CUDA_TOOLKIT_VERSION
  q.toolkit_version = ONNXTRAIN_CUDA_TOOLKIT_VERSION;
#endif
  // Version calls work without a GPU; the driver version is 0 when no driver is installed.
  if (cudaRuntimeGetVersion(&q.runtime_version) != cudaSuccess) q.runtime_version = 0;
  if (cudaDriverGetVersion(&q.driver_version) != cudaSuccess) q.driver_version = 0;
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS) {
    q.cublas_version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  }
#if ONNXTRAIN_HAVE_CUDNN
  {
    // cuDNN >= 9 encodes MAJOR*10000 + MINOR*100 + PATCH; cuDNN 8 used MAJOR*1000.
    const size_t v = cudnnGetVersion();
    const size_t scale = v >= 90000 ? 10000 : 1000;
    q.cudnn_version =
        std::to_string(v / scale) + "." + std::to_string((v % scale) / 100) + "." + std::to_string(v % 100);
  }
#endif

  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // cudart also keeps the error as the "last error"; clear it so later calls start clean.
    (void)cudaGetLastError();
    if (err == cudaErrorNoDevice) {
      q.unavailable_reason = "no GPU visible: no CUDA device (" + cuda_error_text("cudaGetDeviceCount", err) + ")";
    } else if (err == cudaErrorInsufficientDriver) {
      q.unavailable_reason =
          q.driver_version == 0
              ? "no GPU visible: no CUDA driver installed (" + cuda_error_text("cudaGetDeviceCount", err) + ")"
              : "the CUDA driver (supports CUDA " + format_cuda_version(q.driver_version) +
                    ") is older than the runtime (CUDA " + format_cuda_version(q.runtime_version) +
                    "); no GPU usable (" + cuda_error_text("cudaGetDeviceCount", err) + ")";
    } else {
      q.unavailable_reason = "no GPU usable: " + cuda_error_text("cudaGetDeviceCount", err);
    }
    return q;
  }
  if (count == 0) {
    q.unavailable_reason = "no GPU visible: cudaGetDeviceCount returned 0";
    return q;
  }

  std::string failures;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    const cudaError_t perr = cudaGetDeviceProperties(&prop, i);
    if (perr != cudaSuccess) {
      (void)cudaGetLastError();
      failures += (failures.empty() ? "" : "; ") + std::string("device ") + std::to_string(i) + ": " +
                  cuda_error_text("cudaGetDeviceProperties", perr);
      continue;
    }
    CudaDeviceProperties d;
    d.index = i;
    d.name = prop.name;
    d.compute_capability_major = prop.major;
    d.compute_capability_minor = prop.minor;
    d.total_memory_bytes = prop.totalGlobalMem;
    d.multiprocessor_count = prop.multiProcessorCount;
    char bus_id[32] = {};
    if (cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), i) == cudaSuccess) d.pci_bus_id = bus_id;
    q.devices.push_back(std::move(d));
  }
  if (q.devices.empty()) q.unavailable_reason = "no GPU usable: " + failures;
  return q;
}

std::string run_smoke_kernel(int device) {
  cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess) return cuda_error_text("cudaSetDevice", err);
  int* value = nullptr;
  err = cudaMalloc(&value, sizeof(int));
  if (err != cudaSuccess) return cuda_error_text("cudaMalloc", err);
  std::string failure;
  int host = 0;
  write_value_kernel<<<1, 1>>>(value, 42);
  if ((err = cudaGetLastError()) != cudaSuccess) {
    failure = cuda_error_text("kernel launch", err);  // e.g. no kernel image for this architecture
  } else if ((err = cudaMemcpy(&host, value, sizeof(int), cudaMemcpyDeviceToHost)) != cudaSuccess) {
    failure = cuda_error_text("cudaMemcpy", err);
  } else if (host != 42) {
    failure = "smoke kernel wrote " + std::to_string(host) + ", expected 42";
  }
  cudaFree(value);
  return failure;
}

}  // namespace onnxtrain::cuda
