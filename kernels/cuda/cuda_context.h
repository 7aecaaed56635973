// What a CUDA kernel needs from the Stream it runs on: the cudaStream_t, the device, and per-(device,
// thread) cuBLAS and cuDNN handles already bound to that stream, plus a scratch workspace that stays
// valid until the next workspace() call on the same stream (cuDNN convolution algorithms, reductions).
// Handles are created lazily, once per device and host thread, and reused by every kernel. Included only
// under kernels/cuda/.
//
//   void run(Stream& stream, ...) override {
//     cuda::DeviceGuard guard(stream);                      // cudaSetDevice(stream.device_index())
//     cublasHandle_t blas = cuda::cublas_handle(stream);    // cublasSetStream done
//     void* scratch = cuda::workspace(stream, bytes);
//     my_kernel<<<grid, block, 0, cuda::native_stream(stream)>>>(...);
//   }
#pragma once

#include <cstddef>

#include "kernels/cuda/cuda_check.h"
#include "kernels/kernel.h"

namespace onnxtrain::cuda {

inline cudaStream_t native_stream(const Stream& stream) { return static_cast<cudaStream_t>(stream.native_handle()); }

// Makes the stream's device current for the scope; restores the previous device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(const Stream& stream);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

cublasHandle_t cublas_handle(const Stream& stream);  // math mode per --tf32 (math_mode.h)
#if ONNXTRAIN_HAVE_CUDNN
cudnnHandle_t cudnn_handle(const Stream& stream);
#endif

// Device scratch memory of at least `bytes` on the stream's device, owned by the (device, stream) pair;
// stream-ordered, so kernels on that stream may use it back to back.
void* workspace(const Stream& stream, size_t bytes);

// A second such block, for an operand padded or cropped around a cuDNN call (conv_padding.h): apart from
// workspace(), so the algorithm's scratch, found and grown inside the call, never moves it.
void* padding_workspace(const Stream& stream, size_t bytes);

// Launch geometry for a grid-stride loop over n elements.
inline unsigned int grid_for(long long n, unsigned int block = 256) {
  long long blocks = (n + block - 1) / block;
  if (blocks < 1) blocks = 1;
  if (blocks > 65535LL * 8) blocks = 65535LL * 8;
  return static_cast<unsigned int>(blocks);
}

}  // namespace onnxtrain::cuda
