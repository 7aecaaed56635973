// Checked vendor calls for the CUDA kernels: every CUDA runtime, cuBLAS and cuDNN call goes through one
// of these macros, so a failure becomes an onnxtrain::Error carrying the call and the library's own error
// string. The session adds the node and op (Error::at_node) when the Error leaves a kernel's run().
// Included only by code under kernels/cuda/ (it includes the vendor headers).
//
//   ONNXTRAIN_CUDA_CHECK(cudaMemsetAsync(y, 0, bytes, stream));
//   ONNXTRAIN_CUBLAS_CHECK(cublasSgemm(handle, ...));
//   ONNXTRAIN_CUDNN_CHECK(cudnnConvolutionForward(handle, ...));
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "graph/error.h"

#if ONNXTRAIN_HAVE_CUDNN
#include <cudnn.h>
#endif

namespace onnxtrain::cuda {

[[noreturn]] inline void throw_vendor_error(const char* library, const char* call, const std::string& reason,
                                            const char* file, int line) {
  throw Error(std::string(library) + " call failed: " + call + ": " + reason + " (" + file + ":" +
              std::to_string(line) + ")");
}

inline std::string cuda_error_reason(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")";
}

inline std::string cublas_error_reason(cublasStatus_t status) {
  return std::string(cublasGetStatusName(status)) + " (" + cublasGetStatusString(status) + ")";
}

}  // namespace onnxtrain::cuda

#define ONNXTRAIN_CUDA_CHECK(call)                                                                               \
  do {                                                                                                           \
    const cudaError_t onnxtrain_err_ = (call);                                                                   \
    if (onnxtrain_err_ != cudaSuccess)                                                                           \
      ::onnxtrain::cuda::throw_vendor_error("CUDA", #call, ::onnxtrain::cuda::cuda_error_reason(onnxtrain_err_), \
                                            __FILE__, __LINE__);                                                 \
  } while (0)

// After a <<<...>>> launch: a bad configuration is reported at once; faults inside the kernel surface at
// the next synchronising call, which is checked too.
#define ONNXTRAIN_CUDA_CHECK_LAUNCH(kernel_name) \
  ONNXTRAIN_CUDA_CHECK((static_cast<void>(kernel_name), cudaGetLastError()))

#define ONNXTRAIN_CUBLAS_CHECK(call)                                                                       \
  do {                                                                                                     \
    const cublasStatus_t onnxtrain_status_ = (call);                                                       \
    if (onnxtrain_status_ != CUBLAS_STATUS_SUCCESS)                                                        \
      ::onnxtrain::cuda::throw_vendor_error(                                                               \
          "cuBLAS", #call, ::onnxtrain::cuda::cublas_error_reason(onnxtrain_status_), __FILE__, __LINE__); \
  } while (0)

#if ONNXTRAIN_HAVE_CUDNN
#define ONNXTRAIN_CUDNN_CHECK(call)                                                                           \
  do {                                                                                                        \
    const cudnnStatus_t onnxtrain_status_ = (call);                                                           \
    if (onnxtrain_status_ != CUDNN_STATUS_SUCCESS)                                                            \
      ::onnxtrain::cuda::throw_vendor_error("cuDNN", #call, cudnnGetErrorString(onnxtrain_status_), __FILE__, \
                                            __LINE__);                                                        \
  } while (0)
#endif
