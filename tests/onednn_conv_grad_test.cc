// oneDNN's ConvGrad against the reference kernel for convolutions with fewer input channels than
// AVX-512's block of 16 (the fixture CNN's second convolution, 8 -> 16 channels), where the kernel asks for
// the weight gradient over channels-last data on an AVX-512 CPU (kernels/onednn/conv_grad.cc): dX, dW and
// dB agree, and on such a CPU the weight gradient runs oneDNN's AVX-512 kernel rather than its AVX2 one.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "kernels/kernel.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/primitive_sequence_kernel.h"

namespace onnxtrain {
namespace {

using Ints = std::vector<int64_t>;

Tensor random_tensor(const Ints& sizes, std::mt19937& rng) {
  Tensor t(DType::Float32, sizes);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : t.data<float>()) v = dist(rng);
  return t;
}

struct GradCase {
  int64_t n, c, m, size, kernel, stride, pad;
};

KernelSpec conv_grad_spec(const GradCase& g, int64_t out) {
  KernelSpec spec{.op_type = "ConvGrad",
                  .domain = "ai.onnxtrain",
                  .opset = 1,
                  .attributes = {{"strides", Ints{g.stride, g.stride}},
                                 {"pads", Ints{g.pad, g.pad, g.pad, g.pad}},
                                 {"kernel_shape", Ints{g.kernel, g.kernel}}},
                  .node_name = "test"};
  spec.inputs = {{DType::Float32, {g.n, g.m, out, out}},
                 {DType::Float32, {g.n, g.c, g.size, g.size}},
                 {DType::Float32, {g.m, g.c, g.kernel, g.kernel}}};
  spec.outputs = {{DType::Float32, {g.n, g.c, g.size, g.size}},
                  {DType::Float32, {g.m, g.c, g.kernel, g.kernel}},
                  {DType::Float32, {g.m}}};
  return spec;
}

std::unique_ptr<Kernel> prepare(const std::string& implementation, const KernelSpec& spec) {
  const KernelEntry* entry =
      KernelRegistry::builtin().find(spec.domain, spec.op_type, DeviceKind::Cpu, DType::Float32, implementation);
  EXPECT_NE(entry, nullptr) << implementation;
  return entry->prepare(spec);
}

std::vector<Tensor> run(Kernel& kernel, const KernelSpec& spec, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> outs;
  std::vector<TensorView> in, out;
  for (const Tensor& t : inputs) in.push_back(TensorView::of(t));
  for (const TensorDesc& d : spec.outputs) outs.emplace_back(DType::Float32, d.sizes);
  for (const Tensor& t : outs) out.push_back(TensorView::of(t));
  Stream stream;
  kernel.run(stream, in, out);
  return outs;
}

TEST(OnednnConvGrad, FewInputChannelsMatchTheReference) {
  std::mt19937 rng(77);
  const GradCase cases[] = {
      {4, 8, 16, 14, 3, 1, 1},  // the fixture CNN's conv2
      {2, 8, 16, 9, 3, 2, 1},   // strided
      {3, 4, 8, 10, 5, 1, 2},   // 5x5
      {2, 8, 24, 7, 3, 1, 0},   // unpadded, 24 outputs
      {2, 12, 16, 6, 3, 1, 1},  // neither 8 nor 16 inputs
  };
  for (const GradCase& g : cases) {
    const int64_t out = (g.size + 2 * g.pad - g.kernel) / g.stride + 1;
    const KernelSpec spec = conv_grad_spec(g, out);
    SCOPED_TRACE("N " + std::to_string(g.n) + " C " + std::to_string(g.c) + " M " + std::to_string(g.m) + " size " +
                 std::to_string(g.size) + " kernel " + std::to_string(g.kernel) + " stride " +
                 std::to_string(g.stride));
    const std::vector<Tensor> inputs{random_tensor(spec.inputs[0].sizes, rng), random_tensor(spec.inputs[1].sizes, rng),
                                     random_tensor(spec.inputs[2].sizes, rng)};
    std::unique_ptr<Kernel> onednn = prepare("onednn", spec);
    const std::vector<Tensor> want = run(*prepare("reference", spec), spec, inputs);
    const std::vector<Tensor> got = run(*onednn, spec, inputs);
    for (size_t o = 0; o < want.size(); ++o) {
      int failures = 0;
      for (int64_t i = 0; i < want[o].numel() && failures < 5; ++i) {
        const float e = want[o].data<float>()[i], a = got[o].data<float>()[i];
        if (std::abs(a - e) > 1e-4f + 1e-4f * std::abs(e)) {
          ADD_FAILURE() << "output " << o << " element " << i << ": onednn " << a << ", reference " << e;
          ++failures;
        }
      }
    }
  }
}

// (On a CPU without AVX-512 there is no such kernel to take, and the test checks that none is reported.)
TEST(OnednnConvGrad, EightInputChannelsTakeTheAvx512WeightKernelWhereTheCpuHasIt) {
  const GradCase g{64, 8, 16, 14, 3, 1, 1};
  std::unique_ptr<Kernel> kernel = prepare("onednn", conv_grad_spec(g, 14));
  const auto* reports = dynamic_cast<const onednn::ReportsImplementation*>(kernel.get());
  ASSERT_NE(reports, nullptr);
  const std::string implementation = reports->library_implementation();  // "<dX's kernel>, <dW's kernel>"
  const std::string weights = implementation.substr(implementation.rfind(", ") + 2);
  EXPECT_EQ(weights.starts_with("jit:avx512"), onednn::channel_block_is_16()) << implementation;
}

}  // namespace
}  // namespace onnxtrain
