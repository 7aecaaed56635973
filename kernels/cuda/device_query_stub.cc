// Built when CUDA is off (ONNXTRAIN_CUDA=OFF or no nvcc): the query answers that CUDA is absent.
#include "kernels/cuda/device_query.h"

namespace onnxtrain::cuda {

CudaQuery query_devices() {
  CudaQuery q;
  q.compiled = false;
  q.unavailable_reason = "CUDA support not compiled in (configure with -DONNXTRAIN_CUDA=AUTO or ON and nvcc installed)";
  return q;
}

std::string run_smoke_kernel(int /*device*/) { return "CUDA support not compiled in"; }

std::string format_cuda_version(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

}  // namespace onnxtrain::cuda
