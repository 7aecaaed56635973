// What the tests of the CUDA data-movement kernels share (cuda_data_movement_test, cuda_element_index_test):
// a seeded generator with random sizes and tensors of any dtype, index tensors, a kernel case, and one case
// run with the CUDA kernel on cuda:0 or every case compared with the reference kernel bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_runtime.h"
#include "kernels/kernel.h"
#include "tests/reference_kernel_call.h"

namespace onnxtrain::cuda_data_movement_cases {

using Ints = std::vector<int64_t>;

inline std::mt19937& rng() {
  static std::mt19937 r(4321);
  return r;
}

inline int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng()); }

inline Ints random_sizes(int rank, int64_t lo = 1, int64_t hi = 4) {
  Ints s(rank);
  for (int64_t& d : s) d = uniform(lo, hi);
  return s;
}

inline int64_t numel(const Ints& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

struct Case {
  std::string op;
  int opset = 13;
  Attributes attributes;
  std::vector<Tensor> inputs;  // a default Tensor is an omitted optional input
  std::vector<TensorDesc> outputs;
  std::string domain;
};

inline Tensor random_tensor(DType dtype, const Ints& sizes) {
  return testing_support::random_any_dtype(rng(), dtype, sizes);
}

inline Tensor ints(const Ints& v, DType dtype = DType::Int64) { return testing_support::index_tensor(v, dtype); }

using testing_support::spec_of;

// Runs case `c` with the CUDA kernel on cuda:0: inputs copied to the device, outputs copied back.
// With `shape_inputs_on_host`, the inputs an executor may keep in host memory (starts, pads, shapes,
// Range's scalars, ...) stay there: the kernels must read them there, or not at all.
inline bool may_live_on_host(const Case& c, size_t i) {
  if (c.op == "Gather" || c.op == "GatherGrad" || c.op == "Concat") return false;  // data, not shapes
  if (c.op == "Range" || c.op == "ConstantOfShape") return true;
  return i >= 1;
}

inline std::vector<Tensor> run_on_gpu(const Case& c, Kernel& kernel, cuda::DeviceStream& stream,
                                      bool shape_inputs_on_host = false) {
  std::vector<cuda::DeviceBuffer> buffers;
  std::vector<TensorView> in, out;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Tensor& t = c.inputs[i];
    if (t.dtype() == DType::Undefined) {
      in.emplace_back();
      continue;
    }
    if (shape_inputs_on_host && may_live_on_host(c, i)) {
      in.push_back(TensorView::of(t));
      continue;
    }
    buffers.emplace_back(stream, std::max<size_t>(t.nbytes(), 1));
    if (t.nbytes()) cuda::copy_to_device(buffers.back().data(), t.raw(), t.nbytes(), stream);
    in.push_back({t.dtype(), t.sizes(), buffers.back().data(), DeviceKind::Cuda});
  }
  std::vector<Tensor> results;
  for (const TensorDesc& d : c.outputs) {
    results.emplace_back(d.dtype, d.sizes);
    buffers.emplace_back(stream, std::max<size_t>(results.back().nbytes(), 1));
    out.push_back({d.dtype, d.sizes, buffers.back().data(), DeviceKind::Cuda});
  }
  Stream s = stream.kernel_stream(0);
  kernel.run(s, in, out);
  for (size_t i = 0; i < results.size(); ++i)
    if (results[i].nbytes()) cuda::copy_to_host(results[i].raw(), out[i].data, results[i].nbytes(), stream);
  stream.synchronize();
  return results;
}

// Every case's CUDA kernel writes the reference kernel's bytes, on a second run too (it reuses what
// prepare made) and, with `host_input_run`, on a third run that keeps the shape-like inputs in host memory.
inline void expect_cases_match_the_reference(const std::vector<Case>& cases, bool host_input_run) {
  cuda::DeviceStream stream(0);
  for (const Case& c : cases) {
    const KernelSpec spec = spec_of(c);
    const DType dtype = kernel_dtype(spec);
    const std::string what = c.op + " opset " + std::to_string(c.opset) + " " + std::string(dtype_name(dtype));
    const KernelEntry* cuda_entry = KernelRegistry::builtin().find(c.domain, c.op, DeviceKind::Cuda, dtype, "cuda");
    const KernelEntry* ref_entry = KernelRegistry::builtin().find(c.domain, c.op, DeviceKind::Cpu, dtype, "reference");
    ASSERT_NE(cuda_entry, nullptr) << what;
    ASSERT_NE(ref_entry, nullptr) << what;
    const std::vector<Tensor> want = testing_support::run_prepared(*ref_entry->prepare(spec), c.inputs, c.outputs);
    std::unique_ptr<Kernel> kernel = cuda_entry->prepare(spec);
    for (int repeat = 0; repeat < (host_input_run ? 3 : 2); ++repeat) {
      const std::vector<Tensor> got = run_on_gpu(c, *kernel, stream, repeat == 2);
      ASSERT_EQ(got.size(), want.size()) << what;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].nbytes(), want[i].nbytes()) << what;
        EXPECT_TRUE(got[i].nbytes() == 0 || std::memcmp(got[i].raw(), want[i].raw(), got[i].nbytes()) == 0)
            << what << " output " << i << " run " << repeat;
      }
    }
  }
}

// Every op of `ops` has a reference kernel and, in a CUDA build, a CUDA kernel for the same dtypes (none
// without CUDA).
inline void expect_cuda_kernels_cover(const std::vector<std::pair<std::string, std::string>>& ops) {
  for (const auto& [domain, op] : ops) {
    const KernelEntry* cuda_kernel = nullptr;
    const KernelEntry* reference_kernel = nullptr;
    for (const KernelEntry* e : KernelRegistry::builtin().all()) {
      if (e->domain != domain || e->op_type != op) continue;
      if (e->device == DeviceKind::Cuda && e->implementation == "cuda") cuda_kernel = e;
      if (e->device == DeviceKind::Cpu && e->implementation == "reference") reference_kernel = e;
    }
    ASSERT_NE(reference_kernel, nullptr) << op;
    if (!ONNXTRAIN_WITH_CUDA) {
      EXPECT_EQ(cuda_kernel, nullptr) << op << " has a CUDA kernel in a build without CUDA";
      continue;
    }
    ASSERT_NE(cuda_kernel, nullptr) << op;
    EXPECT_EQ(cuda_kernel->dtypes, reference_kernel->dtypes) << op;
  }
}

}  // namespace onnxtrain::cuda_data_movement_cases
