// What the tests of the cuDNN/cuBLAS kernels share (cuda_nn_test, cuda_precision_test): random float32
// tensors, float32 descriptors, and one kernel case run on cuda:0 (twice: the first run finds the
// convolution algorithms, the second uses the cached ones) or on the float32 reference kernel, and the
// test fixture.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_runtime.h"
#include "kernels/kernel.h"
#include "tests/reference_kernel_call.h"

namespace onnxtrain::cuda_nn_run {

using Ints = std::vector<int64_t>;
using testing_support::KernelCase;

inline Tensor random_tensor(std::mt19937& rng, Ints sizes, float lo = -2, float hi = 2) {
  Tensor t(DType::Float32, std::move(sizes));
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.data<float>()) v = dist(rng);
  return t;
}

inline TensorDesc f32(Ints sizes) { return {DType::Float32, std::move(sizes)}; }

// The fixture of the GPU cases: skips without a GPU; r() draws a random tensor.
class CudaNnKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  }
  std::mt19937 rng{2024};
  Tensor r(Ints sizes) { return random_tensor(rng, std::move(sizes)); }
};

// Runs the CUDA kernel of `c` on cuda:0 (inputs copied in, outputs copied back).
inline std::vector<Tensor> run_cuda(const KernelCase& c) {
  const KernelSpec spec{c.op,      c.domain,  c.opset, c.attributes, testing_support::input_descs(c.inputs),
                        c.outputs, "gpu_node"};
  const KernelEntry* entry = KernelRegistry::builtin().find(c.domain, c.op, DeviceKind::Cuda, kernel_dtype(spec));
  if (!entry) throw std::runtime_error("no CUDA kernel for " + c.op);
  std::unique_ptr<Kernel> kernel = entry->prepare(spec);
  cuda::DeviceStream stream(0);
  std::vector<cuda::DeviceBuffer> buffers;
  std::vector<TensorView> in, out;
  for (const Tensor& t : c.inputs) {
    if (t.empty()) {
      in.push_back({});
      continue;
    }
    buffers.emplace_back(stream, std::max<size_t>(t.nbytes(), 1));
    cuda::copy_to_device(buffers.back().data(), t.raw(), t.nbytes(), stream);
    in.push_back({t.dtype(), t.sizes(), buffers.back().data(), DeviceKind::Cuda});
  }
  std::vector<Tensor> results;
  std::vector<size_t> out_buffer;
  for (const TensorDesc& d : c.outputs) {
    results.push_back(d.present() ? Tensor(d.dtype, d.sizes) : Tensor());
    if (!d.present()) {
      out.push_back({});
      out_buffer.push_back(SIZE_MAX);
      continue;
    }
    buffers.emplace_back(stream, std::max<size_t>(results.back().nbytes(), 1));
    out_buffer.push_back(buffers.size() - 1);
    out.push_back({d.dtype, d.sizes, buffers.back().data(), DeviceKind::Cuda});
  }
  // Two runs: the first finds the convolution algorithms, the second uses the cached ones.
  for (uint64_t run = 0; run < 2; ++run) {
    Stream s = stream.kernel_stream(run);
    kernel->run(s, in, out);
  }
  for (size_t o = 0; o < results.size(); ++o) {
    if (out_buffer[o] != SIZE_MAX) {
      cuda::copy_to_host(results[o].raw(), buffers[out_buffer[o]].data(), results[o].nbytes(), stream);
    }
  }
  stream.synchronize();
  return results;
}

inline std::vector<Tensor> run_reference(const KernelCase& c) {
  const KernelSpec spec{c.op, c.domain, c.opset, c.attributes, testing_support::input_descs(c.inputs), c.outputs, "n"};
  const KernelEntry* entry =
      KernelRegistry::builtin().find(c.domain, c.op, DeviceKind::Cpu, DType::Float32, "reference");
  return testing_support::run_prepared(*entry->prepare(spec), c.inputs, c.outputs);
}

}  // namespace onnxtrain::cuda_nn_run
