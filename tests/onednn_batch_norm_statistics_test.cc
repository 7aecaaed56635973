// A training-mode BatchNormalization keeps its batch mean and variance for its gradient in the same run
// (kernels/onednn/primitive_sequence_kernel.h, batch_statistics_key), so that BatchNormalizationGrad does
// not recompute them. Checked on oneDNN's (N,C) path and the plain-layout loops of ranks 3 to 5
// (kernels/onednn/plain_batch_norm.h), whose gradient is also checked against the reference kernel: the forward keeps
// the statistics of X under X's address, the gradient given them matches the gradient that computes its own, it reads
// what is kept (other statistics give another dX), and computes its own once they are forgotten. The same for
// LayerNormalization's row statistics (layer_norm_statistics_key), whose Mean and InvStdDev outputs are also
// checked against the reference kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/onednn/primitive_sequence_kernel.h"
#include "tests/reference_kernel_call.h"

namespace onnxtrain {
namespace {

using namespace testing_support;
using Ints = std::vector<int64_t>;

Tensor random_tensor(std::mt19937& rng, const Ints& sizes, float lo, float hi) {
  std::uniform_real_distribution<float> real(lo, hi);
  Tensor t(DType::Float32, sizes);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = real(rng);
  return t;
}

std::unique_ptr<Kernel> prepare(const KernelSpec& spec, const char* implementation = "onednn") {
  return KernelRegistry::builtin()
      .find(spec.domain, spec.op_type, DeviceKind::Cpu, DType::Float32, implementation)
      ->prepare(spec);
}

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-5 + 1e-4 * std::abs(want.data<float>()[i]))
        << what << " element " << i;
}

// The gradient kernel's outputs computing its own statistics (no stream keeps any), checked against the
// reference kernel's.
std::vector<Tensor> gradient_alone(Kernel& backward, const KernelSpec& spec, const std::vector<Tensor>& inputs) {
  const std::vector<Tensor> alone = run_prepared(backward, inputs, spec.outputs);
  const std::vector<Tensor> reference = run_prepared(*prepare(spec, "reference"), inputs, spec.outputs);
  for (size_t o = 0; o < alone.size(); ++o)
    expect_close(alone[o], reference[o], "against the reference, output " + std::to_string(o));
  return alone;
}

// That `run` keeps, under X's address and `key`, the mean and population variance of each of `groups`
// groups of X's values (`value(g, i)`, i < group_size), in that order.
template <typename Value>
void expect_kept_statistics(const Stream& run, const Tensor& x, const std::string& key, int64_t groups,
                            int64_t group_size, Value&& value) {
  const Stream::Derived kept = run.derived(x.raw(), key);
  ASSERT_NE(kept, nullptr) << "the forward kept no statistics under '" << key << "'";
  ASSERT_EQ(kept->size(), 2 * groups * sizeof(float));
  const auto* stats = reinterpret_cast<const float*>(kept->data());
  for (int64_t g = 0; g < groups; ++g) {  // in double
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < group_size; ++i) {
      const double v = value(g, i);
      sum += v;
      squares += v * v;
    }
    const double mean = sum / group_size;
    EXPECT_NEAR(stats[g], mean, 1e-5) << "mean of group " << g;
    EXPECT_NEAR(stats[groups + g], squares / group_size - mean * mean, 1e-4) << "variance of group " << g;
  }
}

// That `backward` reads the statistics of X kept under `key` in `run` (`groups` means, then as many
// variances): with them it gives `alone`, with mean 0 and variance 1 kept instead another dX, and `alone`
// again once they are forgotten.
void expect_gradient_reads_kept(Stream& run, Kernel& backward, const KernelSpec& spec,
                                const std::vector<Tensor>& inputs, const Tensor& x, const std::string& key,
                                int64_t groups, const std::vector<Tensor>& alone) {
  std::vector<Tensor> with_kept = run_prepared(run, backward, inputs, spec.outputs);
  for (size_t o = 0; o < alone.size(); ++o) expect_close(with_kept[o], alone[o], "output " + std::to_string(o));
  auto other = std::make_shared<std::vector<std::byte>>(2 * groups * sizeof(float));
  for (int64_t g = 0; g < groups; ++g) reinterpret_cast<float*>(other->data())[groups + g] = 1.0f;
  run.keep_derived(x.raw(), key, other);
  with_kept = run_prepared(run, backward, inputs, spec.outputs);
  double difference = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    difference = std::max<double>(difference, std::abs(with_kept[0].data<float>()[i] - alone[0].data<float>()[i]));
  EXPECT_GT(difference, 1e-2) << "the gradient did not read the kept statistics";
  run.forget_derived(x.raw());
  with_kept = run_prepared(run, backward, inputs, spec.outputs);
  expect_close(with_kept[0], alone[0], "dX after the statistics are forgotten");
}

TEST(BatchNormStatistics, TheGradientReadsTheForwardsBatchStatisticsWithinARun) {
  // oneDNN's (N,C) path and the plain-layout loops of ranks 3-5 (1x1 planes, channels not a multiple of 16).
  for (const Ints& shape : {Ints{4, 32, 3, 3}, Ints{8, 16}, Ints{5, 20, 1, 1}, Ints{3, 18, 2, 1, 3}}) {
    SCOPED_TRACE(std::to_string(shape.size()) + "-D");
    std::mt19937 rng(51);
    const int64_t channels = shape[1];
    const Tensor x = random_tensor(rng, shape, -1, 3), dy = random_tensor(rng, shape, -1, 1);
    const Tensor scale = random_tensor(rng, {channels}, 0.5, 1.5), bias = random_tensor(rng, {channels}, -1, 1);
    const Tensor running_mean = random_tensor(rng, {channels}, -1, 1),
                 running_var = random_tensor(rng, {channels}, 1, 2);
    KernelSpec forward_spec{
        .op_type = "BatchNormalization", .opset = 15, .attributes = {{"training_mode", int64_t{1}}}, .node_name = "bn"};
    forward_spec.inputs = input_descs({x, scale, bias, running_mean, running_var});
    forward_spec.outputs = {{DType::Float32, shape}, {DType::Float32, {channels}}, {DType::Float32, {channels}}};
    KernelSpec grad_spec{.op_type = "BatchNormalizationGrad",
                         .domain = "ai.onnxtrain",
                         .opset = 15,
                         .attributes = {{"training_mode", int64_t{1}}, {"epsilon", 1e-5f}},
                         .node_name = "bn_grad"};
    const std::vector<Tensor> grad_inputs{dy, x, scale, running_mean, running_var};
    grad_spec.inputs = input_descs(grad_inputs);
    grad_spec.outputs = {{DType::Float32, shape}, {DType::Float32, {channels}}, {DType::Float32, {channels}}};
    const std::unique_ptr<Kernel> forward = prepare(forward_spec), backward = prepare(grad_spec);
    const std::vector<Tensor> alone = gradient_alone(*backward, grad_spec, grad_inputs);

    Stream run(DeviceKind::Cpu, 1);
    run.enable_derived_values();
    run_prepared(run, *forward, {x, scale, bias, running_mean, running_var}, forward_spec.outputs);
    const std::string key = "BatchNormalization batch mean and variance of " + std::to_string(channels) + " channels";
    const int64_t per_channel = x.numel() / channels, inner = per_channel / shape[0];
    expect_kept_statistics(run, x, key, channels, per_channel, [&](int64_t c, int64_t i) {
      return x.data<float>()[(i / inner * channels + c) * inner + i % inner];
    });
    expect_gradient_reads_kept(run, *backward, grad_spec, grad_inputs, x, key, channels, alone);
  }
}

TEST(LayerNormStatistics, TheGradientReadsTheForwardsRowStatisticsWithinARun) {
  struct Case {
    Ints shape;
    int64_t axis;
    bool statistics_out;  // the forward also outputs Mean and InvStdDev
  };
  for (const Case& c : {Case{{6, 40}, -1, false}, Case{{2, 3, 5, 8}, 2, true}}) {
    SCOPED_TRACE(std::to_string(c.shape.size()) + "-D, axis " + std::to_string(c.axis));
    std::mt19937 rng(52);
    const int64_t axis = c.axis < 0 ? c.axis + static_cast<int64_t>(c.shape.size()) : c.axis;
    int64_t rows = 1, width = 1;
    for (size_t d = 0; d < c.shape.size(); ++d) (static_cast<int64_t>(d) < axis ? rows : width) *= c.shape[d];
    Ints normalized(c.shape.begin() + axis, c.shape.end()), stat_sizes(c.shape.begin(), c.shape.begin() + axis);
    for (size_t d = stat_sizes.size(); d < c.shape.size(); ++d) stat_sizes.push_back(1);
    const Tensor x = random_tensor(rng, c.shape, -1, 3), dy = random_tensor(rng, c.shape, -1, 1);
    const Tensor scale = random_tensor(rng, normalized, 0.5, 1.5), bias = random_tensor(rng, normalized, -1, 1);
    const Attributes attributes{{"axis", c.axis}, {"epsilon", 1e-5f}};
    KernelSpec forward_spec{.op_type = "LayerNormalization", .opset = 17, .attributes = attributes, .node_name = "ln"};
    forward_spec.inputs = input_descs({x, scale, bias});
    forward_spec.outputs = {{DType::Float32, c.shape}};
    if (c.statistics_out) forward_spec.outputs.push_back({DType::Float32, stat_sizes});
    if (c.statistics_out) forward_spec.outputs.push_back({DType::Float32, stat_sizes});
    KernelSpec grad_spec{.op_type = "LayerNormalizationGrad",
                         .domain = "ai.onnxtrain",
                         .opset = 1,
                         .attributes = attributes,
                         .node_name = "ln_grad"};
    const std::vector<Tensor> grad_inputs{dy, x, scale};
    grad_spec.inputs = input_descs(grad_inputs);
    grad_spec.outputs = {{DType::Float32, c.shape}, {DType::Float32, normalized}, {DType::Float32, normalized}};
    const std::unique_ptr<Kernel> forward = prepare(forward_spec), backward = prepare(grad_spec);
    const std::vector<Tensor> alone = gradient_alone(*backward, grad_spec, grad_inputs);

    Stream run(DeviceKind::Cpu, 1);
    run.enable_derived_values();
    const std::vector<Tensor> y = run_prepared(run, *forward, {x, scale, bias}, forward_spec.outputs);
    const std::vector<Tensor> y_reference =
        run_prepared(*prepare(forward_spec, "reference"), {x, scale, bias}, forward_spec.outputs);
    for (size_t o = 0; o < y.size(); ++o) expect_close(y[o], y_reference[o], "forward output " + std::to_string(o));
    const std::string key =
        "LayerNormalization mean and variance of " + std::to_string(rows) + " rows of " + std::to_string(width);
    expect_kept_statistics(run, x, key, rows, width,
                           [&](int64_t r, int64_t i) { return x.data<float>()[r * width + i]; });
    expect_gradient_reads_kept(run, *backward, grad_spec, grad_inputs, x, key, rows, alone);
  }
}

}  // namespace
}  // namespace onnxtrain
