// The CUDA kernels of the element and ND index ops: GatherElements, ScatterElements, GatherND, ScatterND and their
// backward ops GatherElementsGrad, GatherNDGrad. On the CPU (everywhere): the host/device index math of
// kernels/cuda/element_index.h against the reference kernels (GatherElements and GatherND sources with
// their bad indices, the ScatterElements fold bit for bit with its bad-index report) and the registry's
// CUDA entries. On a GPU (skipped, saying so, when no CUDA device is visible): every kernel against the
// reference kernel, bit for bit, and the lazily reported index fault.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/error.h"
#include "kernels/cuda/cuda_runtime.h"
#include "kernels/cuda/element_index.h"
#include "kernels/kernel.h"
#include "kernels/reference/gather_nd_index.h"
#include "tests/cuda_data_movement_cases.h"
#include "tests/reference_kernel_call.h"

using namespace onnxtrain;
using namespace onnxtrain::cuda_index;
using namespace onnxtrain::cuda_data_movement_cases;

namespace {

// Index tensors for the element ops: sizes `sizes`, values in [-n, n).
Tensor random_indices(const Ints& sizes, int64_t n, DType dtype = DType::Int64) {
  Ints v(numel(sizes));
  for (int64_t& x : v) x = uniform(-n, n - 1);
  return ints(v, dtype).reshaped(sizes);
}

// Random data and index sizes of the element ops: rank 1..4, indices no longer than data off `axis`.
struct ElementShapes {
  Ints data, indices;
  int64_t axis = 0;
};
ElementShapes random_element_shapes() {
  ElementShapes s;
  s.data = random_sizes(static_cast<int>(uniform(1, 4)));
  s.axis = uniform(0, static_cast<int64_t>(s.data.size()) - 1);
  s.indices = s.data;
  for (size_t k = 0; k < s.data.size(); ++k)
    s.indices[k] = static_cast<int64_t>(k) == s.axis ? uniform(0, 5) : uniform(1, s.data[k]);
  return s;
}

// The reference kernel of `op` (domain "" or ai.onnxtrain) on the inputs.
std::vector<Tensor> run_reference(const std::string& domain, const std::string& op, int opset, Attributes attributes,
                                  std::vector<Tensor> inputs, std::vector<TensorDesc> outputs) {
  const testing_support::KernelCase c{op, opset, std::move(attributes), std::move(inputs), std::move(outputs), domain};
  const KernelSpec spec = spec_of(c);
  const KernelEntry* entry =
      KernelRegistry::builtin().find(domain, op, DeviceKind::Cpu, kernel_dtype(spec), "reference");
  return testing_support::run_prepared(*entry->prepare(spec), c.inputs, c.outputs);
}

TEST(CudaDataMovementIndex, GatherElementsSourceMatchesTheReference) {
  for (int trial = 0; trial < 60; ++trial) {
    const ElementShapes s = random_element_shapes();
    Tensor data(DType::Int64, s.data);  // each element holds its own offset
    for (int64_t i = 0; i < data.numel(); ++i) data.data<int64_t>()[i] = i;
    const Tensor indices = random_indices(s.indices, s.data[s.axis], trial % 2 ? DType::Int32 : DType::Int64);
    const Tensor want =
        run_reference("", "GatherElements", 13, {{"axis", s.axis}}, {data, indices}, {{DType::Int64, s.indices}})[0];
    const ElementsGeometry g = elements_geometry(s.data, s.indices, s.axis);
    for (int64_t flat = 0; flat < want.numel(); ++flat)
      ASSERT_EQ(gather_elements_source(flat, g, indices.raw(), indices.dtype() == DType::Int64),
                want.data<int64_t>()[flat])
          << "trial " << trial;
  }
  const ElementsGeometry g = elements_geometry({2, 3}, {2, 2}, 1);
  const Ints bad = {0, 3, -4, -3};
  EXPECT_EQ(gather_elements_source(0, g, bad.data(), true), 0);
  EXPECT_EQ(gather_elements_source(1, g, bad.data(), true), -1);
  EXPECT_EQ(gather_elements_source(2, g, bad.data(), true), -1);
  EXPECT_EQ(gather_elements_source(3, g, bad.data(), true), 3);  // -3 is column 0 of row 1
}

TEST(CudaDataMovementIndex, ScatterFoldIsTheReferenceBitForBit) {
  const auto add = [](float a, float b) { return a + b; };
  const auto last = [](float, float b) { return b; };
  for (int trial = 0; trial < 60; ++trial) {
    const ElementShapes s = random_element_shapes();
    const Tensor indices = random_indices(s.indices, s.data[s.axis]);
    const Tensor dy = random_tensor(DType::Float32, s.indices), data = random_tensor(DType::Float32, s.data);
    const ElementsGeometry g = elements_geometry(s.data, s.indices, s.axis);
    const Attributes axis = {{"axis", s.axis}};
    const Tensor grad = run_reference("ai.onnxtrain", "GatherElementsGrad", 1, axis, {dy, ints(s.data), indices},
                                      {{DType::Float32, s.data}})[0];
    Attributes add_axis = axis;
    add_axis["reduction"] = std::string("add");
    const Tensor added =
        run_reference("", "ScatterElements", 16, add_axis, {data, indices, dy}, {{DType::Float32, s.data}})[0];
    const Tensor written =
        run_reference("", "ScatterElements", 16, axis, {data, indices, dy}, {{DType::Float32, s.data}})[0];
    const float* d = dy.data<float>().data();
    for (int64_t flat = 0; flat < data.numel(); ++flat) {
      bool bad = false;
      const float x = data.data<float>()[flat];
      ASSERT_EQ(scatter_elements_fold(flat, g, indices.raw(), true, 0.0f, d, add, &bad), grad.data<float>()[flat]);
      ASSERT_EQ(scatter_elements_fold(flat, g, indices.raw(), true, x, d, add, &bad), added.data<float>()[flat]);
      ASSERT_EQ(scatter_elements_fold(flat, g, indices.raw(), true, x, d, last, &bad), written.data<float>()[flat]);
      ASSERT_FALSE(bad) << "trial " << trial;
    }
  }
  // A bad index is reported by the element at coordinate 0 along the axis only.
  const ElementsGeometry g = elements_geometry({2, 3}, {1, 3}, 0);
  const Ints bad_indices = {0, 2, -1};
  const std::vector<float> dy = {1, 2, 3};
  bool bad = false;
  scatter_elements_fold(4, g, bad_indices.data(), true, 0.0f, dy.data(), add, &bad);  // (1, 1): along = 1
  EXPECT_FALSE(bad);
  scatter_elements_fold(1, g, bad_indices.data(), true, 0.0f, dy.data(), add, &bad);  // (0, 1): along = 0
  EXPECT_TRUE(bad);
}

TEST(CudaDataMovementIndex, GatherNDSourceMatchesTheReference) {
  for (int trial = 0; trial < 60; ++trial) {
    const Ints data_sizes = random_sizes(static_cast<int>(uniform(1, 4)));
    const auto r = static_cast<int64_t>(data_sizes.size());
    const int64_t batch_dims = uniform(0, r - 1), k = uniform(1, r - batch_dims);
    Ints index_sizes(data_sizes.begin(), data_sizes.begin() + batch_dims);
    for (int64_t extra = uniform(0, 2); extra > 0; --extra) index_sizes.push_back(uniform(1, 3));
    index_sizes.push_back(k);
    Ints v(numel(index_sizes));
    for (size_t p = 0; p < v.size(); ++p) {
      const int64_t n = data_sizes[batch_dims + static_cast<int64_t>(p) % k];
      v[p] = uniform(-n, n - 1);
    }
    const Tensor indices = ints(v).reshaped(index_sizes);
    Tensor data(DType::Int64, data_sizes);
    for (int64_t i = 0; i < data.numel(); ++i) data.data<int64_t>()[i] = i;
    const KernelSpec spec =
        spec_of(testing_support::KernelCase{"GatherND", 13, {{"batch_dims", batch_dims}}, {data, indices}});
    const reference::GatherNDLayout l = reference::gather_nd_layout(spec, data_sizes, index_sizes);
    const Tensor want = run_reference("", "GatherND", 13, {{"batch_dims", batch_dims}}, {data, indices},
                                      {{DType::Int64, l.out_sizes}})[0];
    GatherNDGeometry g{.rows = l.rows, .inner = l.inner, .count = l.count, .k = static_cast<int>(k)};
    for (int64_t c = 0; c < k; ++c) g.dims[c] = l.dims[c];
    for (int64_t flat = 0; flat < want.numel(); ++flat)
      ASSERT_EQ(gather_nd_source(flat, g, indices.raw(), true), want.data<int64_t>()[flat]) << "trial " << trial;
  }
  GatherNDGeometry g{.rows = 6, .inner = 1, .count = 2, .k = 2};
  g.dims[0] = 2;
  g.dims[1] = 3;
  const std::vector<int32_t> bad = {1, -1, 2, 0};
  EXPECT_EQ(gather_nd_row(0, g, bad.data(), false), 5);
  EXPECT_EQ(gather_nd_row(1, g, bad.data(), false), -1);
}

TEST(CudaDataMovementRegistry, CoversTheElementAndNDOps) {
  expect_cuda_kernels_cover({{"", "GatherElements"},
                             {"", "ScatterElements"},
                             {"", "GatherND"},
                             {"", "ScatterND"},
                             {"ai.onnxtrain", "GatherElementsGrad"},
                             {"ai.onnxtrain", "GatherNDGrad"}});
}

std::vector<Case> element_gpu_cases() {
  std::vector<Case> cases;
  const DType f = DType::Float32;
  const Tensor x = random_tensor(f, {3, 4, 5});
  const Tensor h = random_tensor(DType::Float16, {3, 4, 5});
  const Tensor i64 = random_tensor(DType::Int64, {3, 4, 5});
  const Tensor along1 = random_indices({3, 6, 5}, 4, DType::Int32);  // repeated, negative; longer along the axis
  const Tensor shorter = random_indices({2, 4, 3}, 3);               // shorter than x off axis 0
  cases.push_back({"GatherElements", 13, {{"axis", int64_t{1}}}, {x, along1}, {{f, {3, 6, 5}}}});
  cases.push_back({"GatherElements", 11, {}, {h, shorter}, {{DType::Float16, {2, 4, 3}}}});
  cases.push_back({"GatherElementsGrad",
                   1,
                   {{"axis", int64_t{1}}},
                   {random_tensor(DType::Float64, {3, 6, 5}), ints({3, 4, 5}), along1},
                   {{DType::Float64, {3, 4, 5}}},
                   "ai.onnxtrain"});
  cases.push_back({"GatherElementsGrad",
                   1,
                   {},
                   {random_tensor(f, {2, 4, 3}), ints({3, 4, 5}), shorter},
                   {{f, {3, 4, 5}}},
                   "ai.onnxtrain"});
  for (const char* reduction : {"none", "add", "mul", "max", "min"}) {
    cases.push_back({"ScatterElements",
                     18,
                     {{"axis", int64_t{1}}, {"reduction", std::string(reduction)}},
                     {x, along1, random_tensor(f, {3, 6, 5})},
                     {{f, {3, 4, 5}}}});
  }
  cases.push_back({"ScatterElements",
                   16,
                   {{"reduction", std::string("add")}},
                   {i64, shorter, random_tensor(DType::Int64, {2, 4, 3})},
                   {{DType::Int64, {3, 4, 5}}}});
  cases.push_back({"ScatterElements",
                   13,
                   {{"axis", int64_t{-1}}},
                   {h, random_indices({3, 4, 2}, 5), random_tensor(DType::Float16, {3, 4, 2})},
                   {{DType::Float16, {3, 4, 5}}}});
  const Tensor rows = ints({2, -1, 0, 2, 1, 1, -3, 0}, DType::Int32).reshaped({2, 2, 2});  // (3, 4) coordinates
  cases.push_back({"GatherND", 13, {}, {x, rows}, {{f, {2, 2, 5}}}});
  cases.push_back({"GatherND",
                   12,
                   {{"batch_dims", int64_t{1}}},
                   {i64, ints({3, 0, -1, 1, 2, 2}).reshaped({3, 2, 1})},
                   {{DType::Int64, {3, 2, 5}}}});
  // ScatterND over the same rows (negative coordinates), each reduction; with k = rank, whole elements in
  // int64, one of them written twice.
  for (const char* reduction : {"none", "add", "mul", "max", "min"}) {
    cases.push_back({"ScatterND",
                     18,
                     {{"reduction", std::string(reduction)}},
                     {x, rows, random_tensor(f, {2, 2, 5})},
                     {{f, {3, 4, 5}}}});
  }
  cases.push_back({"ScatterND",
                   16,
                   {{"reduction", std::string("add")}},
                   {i64, ints({2, 3, 4, 0, 0, 0, 2, 3, 4}).reshaped({3, 3}), random_tensor(DType::Int64, {3})},
                   {{DType::Int64, {3, 4, 5}}}});
  cases.push_back({"GatherNDGrad",
                   1,
                   {},
                   {random_tensor(DType::Float64, {2, 2, 5}), ints({3, 4, 5}), rows},
                   {{DType::Float64, {3, 4, 5}}},
                   "ai.onnxtrain"});
  cases.push_back({"GatherNDGrad",
                   1,
                   {{"batch_dims", int64_t{1}}},
                   {random_tensor(f, {3, 2, 5}), ints({3, 4, 5}), ints({3, 0, -1, 1, 2, 2}).reshaped({3, 2, 1})},
                   {{f, {3, 4, 5}}},
                   "ai.onnxtrain"});
  return cases;
}

// The element and ND ops read their indices on the device, so every input goes there (no host-input run).
TEST(CudaDataMovementKernels, ElementAndNDOpsMatchTheReferenceBitForBit) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  expect_cases_match_the_reference(element_gpu_cases(), /*host_input_run=*/false);
}

// An out-of-range index cannot throw from device code: the next run of the same kernel reports it.
TEST(CudaDataMovementKernels, ElementAndNDOpsReportABadIndexAtTheNextRun) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  cuda::DeviceStream stream(0);
  const DType f = DType::Float32;
  const Tensor x = random_tensor(f, {2, 3});
  const std::vector<Case> cases = {
      {"GatherElements", 13, {}, {x, ints({0, 2, 1}).reshaped({1, 3})}, {{f, {1, 3}}}},
      {"ScatterElements",
       13,
       {{"axis", int64_t{1}}},
       {x, ints({-4}).reshaped({1, 1}), random_tensor(f, {1, 1})},
       {{f, {2, 3}}}},
      {"GatherND", 13, {}, {x, ints({1, 3}).reshaped({1, 2})}, {{f, {1}}}},
      {"ScatterND", 13, {}, {x, ints({-3}).reshaped({1, 1}), random_tensor(f, {1, 3})}, {{f, {2, 3}}}},
      {"GatherElementsGrad",
       1,
       {},
       {random_tensor(f, {1, 3}), ints({2, 3}), ints({0, -3, 1}).reshaped({1, 3})},
       {{f, {2, 3}}},
       "ai.onnxtrain"},
      {"GatherNDGrad",
       1,
       {},
       {random_tensor(f, {1, 3}), ints({2, 3}), ints({2}).reshaped({1, 1})},
       {{f, {2, 3}}},
       "ai.onnxtrain"},
  };
  for (const Case& c : cases) {
    const KernelSpec spec = spec_of(c);
    std::unique_ptr<Kernel> kernel =
        KernelRegistry::builtin().find(c.domain, c.op, DeviceKind::Cuda, DType::Float32, "cuda")->prepare(spec);
    run_on_gpu(c, *kernel, stream);  // enqueues, raises the flag
    try {
      run_on_gpu(c, *kernel, stream);
      ADD_FAILURE() << c.op << ": expected an Error for the out-of-range index";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("index out of range"), std::string::npos) << c.op << ": " << e.what();
    }
  }
}

}  // namespace
