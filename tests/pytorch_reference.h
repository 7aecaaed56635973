// A model's first training step against PyTorch's, from a fixture script's npz (the scripts beside the
// fixtures in tests/data/resize/, tests/data/einsum/): `input` and `labels`, PyTorch's loss in float32 and
// float64 (loss32, loss64), and each parameter's gradient in both (grad32/NAME, grad64/NAME). The loss and
// every gradient must be within 10x PyTorch's own float32 error (against its float64 run) plus 1e-6 of the
// tensor's largest element, and every parameter must get a gradient.
//
//   expect_first_step_matches_pytorch(dir + "upsample_ts.onnx", dir + "upsample_reference.npz", 10);
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "executor/trainer.h"
#include "frontend/dataset_readers.h"
#include "frontend/importer.h"

namespace onnxtrain::testing_support {

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

inline double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// `parameters`: how many the model trains (each must have its reference gradient). `bind_batch`: import
// with the batch bound to the input's (shapes fold to numbers), else with it symbolic, as `train` does.
inline void expect_first_step_matches_pytorch(const std::string& model_path, const std::string& reference_path,
                                              size_t parameters, bool bind_batch = true) {
  const NpzArchive ref = read_npz(reference_path);
  const Tensor& x = *ref.find("input");
  ImportOptions options;
  if (bind_batch) options.batch = x.sizes()[0];
  ImportedModel model = import_model(model_path, options);
  ASSERT_TRUE(model.unsupported_ops.empty()) << "first: " << model.unsupported_ops.front();
  Trainer trainer(model.graph, TrainerOptions{});
  float loss = 0;
  const std::map<std::string, Tensor> grads =
      trainer.compute_gradients(DataInputs(NamedTensors{{"input", x}}), *ref.find("labels"), &loss);

  const double loss64 = ref.find("loss64")->to_double()[0], loss32 = ref.find("loss32")->to_double()[0];
  EXPECT_LE(std::abs(loss - loss64), 10 * std::abs(loss32 - loss64) + 1e-6 * std::abs(loss64));
  size_t checked = 0;
  double worst = 0;
  for (size_t k = 0; k < ref.names.size(); ++k) {
    const std::string& name = ref.names[k];
    if (name.rfind("grad64/", 0) != 0) continue;
    const std::string param = name.substr(7);
    const auto g = grads.find(param);
    ASSERT_NE(g, grads.end()) << param << " gets no gradient";
    const std::vector<double> g64 = ref.arrays[k].to_double(), g32 = ref.find("grad32/" + param)->to_double();
    const std::vector<double> got = g->second.to_double();
    ASSERT_EQ(got.size(), g64.size()) << param;
    const double bound = 10 * max_abs_difference(g32, g64) + 1e-6 * max_abs(g64);
    const double error = max_abs_difference(got, g64);
    EXPECT_LE(error, bound) << param << ": max |g - g64| " << error << ", PyTorch float32's "
                            << max_abs_difference(g32, g64);
    worst = std::max(worst, error / bound);
    ++checked;
  }
  EXPECT_EQ(checked, parameters);
  EXPECT_EQ(grads.size(), parameters);
  std::printf("%s: loss %.7f (PyTorch float64 %.7f), worst gradient at %.2f of its bound\n", model_path.c_str(), loss,
              loss64, worst);
}

}  // namespace onnxtrain::testing_support
