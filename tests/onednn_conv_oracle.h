// The oneDNN convolution kernels' tests share this oracle: random inputs, a case's shapes, its Conv and
// ConvGrad specs, and a run of a spec on the "onednn" and the "reference" kernels with every output asked
// for compared.
//
//   const std::string implementation = expect_matches_reference(conv_spec(c, inputs), inputs);
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/onednn/onednn_common.h"
#include "tests/reference_kernel_call.h"

namespace onnxtrain::testing_support {

using Ints = std::vector<int64_t>;

inline Tensor random_tensor(std::mt19937& rng, const Ints& sizes) {
  std::uniform_real_distribution<float> real(-1, 1);
  Tensor t(DType::Float32, sizes);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = real(rng);
  return t;
}

struct ConvCase {
  std::string label;
  Attributes attributes;
  Ints x, w, y;
  bool bias = true;
};

// The Conv of case `c` on `inputs` (X, W[, B]).
inline KernelSpec conv_spec(const ConvCase& c, const std::vector<Tensor>& inputs) {
  KernelSpec spec{.op_type = "Conv", .opset = 17, .attributes = c.attributes, .node_name = "t"};
  spec.inputs = input_descs(inputs);
  spec.outputs = {{DType::Float32, c.y}};
  return spec;
}

// The ConvGrad of case `c` on `inputs` (dY, X, W) asking for the `wanted` ones of dX, dW and dB.
inline KernelSpec conv_grad_spec(const ConvCase& c, const std::vector<Tensor>& inputs,
                                 const std::array<bool, 3>& wanted) {
  KernelSpec spec{
      .op_type = "ConvGrad", .domain = "ai.onnxtrain", .opset = 17, .attributes = c.attributes, .node_name = "t"};
  spec.inputs = input_descs(inputs);
  const Ints sizes[3] = {c.x, c.w, {c.w[0]}};
  for (int o = 0; o < 3; ++o) spec.outputs.push_back(wanted[o] ? TensorDesc{DType::Float32, sizes[o]} : TensorDesc{});
  return spec;
}

// Runs `spec` on the "onednn" and the "reference" entries and compares every output asked for: each element
// within 1e-5 + 1e-4 of itself, or, given `of_largest`, within that fraction of the output's largest element
// (Winograd's transforms, whose error scales with the output, not with each element).
// Returns what the oneDNN kernel reports it ran ("" for the reference loops).
inline std::string expect_matches_reference(const KernelSpec& spec, const std::vector<Tensor>& inputs,
                                            std::optional<float> of_largest = std::nullopt) {
  const auto entry = [&](const char* implementation) {
    const KernelEntry* e =
        KernelRegistry::builtin().find(spec.domain, spec.op_type, DeviceKind::Cpu, DType::Float32, implementation);
    if (!e) throw Error("no " + std::string(implementation) + " kernel for " + spec.op_type);
    return e;
  };
  const std::unique_ptr<Kernel> onednn = entry("onednn")->prepare(spec);
  const auto* reports = dynamic_cast<const onednn::ReportsImplementation*>(onednn.get());
  const std::vector<Tensor> got = run_prepared(*onednn, inputs, spec.outputs);
  const std::vector<Tensor> want = run_prepared(*entry("reference")->prepare(spec), inputs, spec.outputs);
  for (size_t o = 0; o < got.size(); ++o) {
    if (!spec.outputs[o].present()) continue;
    float largest = 0;
    for (int64_t i = 0; i < want[o].numel(); ++i) largest = std::max(largest, std::abs(want[o].data<float>()[i]));
    int failures = 0;
    for (int64_t i = 0; i < got[o].numel() && failures < 5; ++i) {
      const float g = got[o].data<float>()[i], w = want[o].data<float>()[i];
      if (std::abs(g - w) > (of_largest ? *of_largest * largest : 1e-5f + 1e-4f * std::abs(w))) {
        ADD_FAILURE() << "output " << o << " element " << i << ": onednn " << g << ", reference " << w;
        ++failures;
      }
    }
  }
  return reports ? reports->library_implementation() : "";
}

}  // namespace onnxtrain::testing_support
