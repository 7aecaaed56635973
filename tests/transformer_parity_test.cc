// Hugging Face transformers exported by PyTorch (models/transformers/, made by models/make_transformers.py):
// every export imports, and the first step's loss and the gradient of every trained parameter equal
// PyTorch's (dropout 0). Judged per tensor against a float64 PyTorch run, as models/transformers/README.md
// explains: max|g - g64| <= 10 * max|g32 - g64| (PyTorch's own float32 error) + 1e-6 * max|g64|
// + 1e-9 * (the largest gradient element of the model). The floor covers tensors whose exact gradient is
// zero (attention key biases), where float32 gives pure round-off. The test prints each export's worst
// tensor as a fraction of its bound (the README quotes these lines). Then ten AdamW steps the same way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "executor/optimizer.h"
#include "executor/trainer.h"
#include "frontend/dataset_readers.h"
#include "frontend/importer.h"

namespace onnxtrain {
namespace {

const std::string kDir = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/transformers/";

nlohmann::json initializer_map() {
  std::ifstream in(kDir + "initializers.json");
  return nlohmann::json::parse(in);
}

double max_abs_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_double(), y = b.to_double();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_double()) m = std::max(m, std::abs(v));
  return m;
}

// Every data input of the model with its reference value, by name: input_ids or pixel_values; BERT's
// attention_mask and token_type_ids; T5's decoder_input_ids.
DataInputs data_inputs(const Graph& g, const NpzArchive& ref) {
  NamedTensors named;
  for (ValueId id : g.inputs) {
    const std::string& name = g.value(id).name;
    const Tensor* x = ref.find(name);
    if (!x) throw Error("the reference has no array named after the model input '" + name + "'");
    named.emplace_back(name, *x);
  }
  return DataInputs(std::move(named));
}

// One export with its PyTorch reference: the model imported with its sequence axes bound to the
// reference inputs' length (16), the initializer → PyTorch parameter map, the inputs and the labels.
struct Export {
  NpzArchive ref;
  nlohmann::json names;
  ImportedModel model;
  DataInputs x;
  Tensor labels;
};

Export load_export(const std::string& file) {
  Export e{.ref = read_npz(kDir + file.substr(0, file.rfind('_')) + "_reference.npz"),
           .names = initializer_map().at(file)};
  e.model = import_model(kDir + file);
  e.x = data_inputs(e.model.graph, e.ref);
  std::map<std::string, std::vector<int64_t>> sizes;
  for (const auto& [name, tensor] : e.x.tensors) sizes[name] = tensor.sizes();
  e.model = import_model(kDir + file, {.dims = input_dim_bindings(e.model.graph, sizes)});
  e.labels = *e.ref.find("labels");
  return e;
}

// The largest gradient element of the model in PyTorch's float64 run (the floors' scale).
double largest_gradient(const Export& e) {
  double largest = 0;
  for (const auto& [initializer, param] : e.names.items())
    largest = std::max(largest, max_abs(*e.ref.find("grad64/" + param.get<std::string>())));
  return largest;
}

class HuggingFaceExport : public ::testing::TestWithParam<std::string> {};

void expect_first_step_gradients_match_pytorch(const std::string& file) {
  Export e = load_export(file);
  const NpzArchive& ref = e.ref;
  const nlohmann::json& names = e.names;
  const DataInputs& x = e.x;
  const Tensor& labels = e.labels;
  TrainerOptions options;
  options.loss.classes_last = labels.rank() == 2;  // language models: (N, T, V) logits
  Trainer trainer(e.model.graph, options);
  float loss = 0;
  const std::map<std::string, Tensor> grads = trainer.compute_gradients(x, labels, &loss);

  const double loss64 = ref.find("loss64")->to_double()[0], loss32 = ref.find("loss32")->to_double()[0];
  EXPECT_LE(std::abs(loss - loss64), 10 * std::abs(loss32 - loss64) + 1e-6 * std::abs(loss64))
      << "loss " << loss << ", PyTorch float64 " << loss64;

  const double largest = largest_gradient(e);
  EXPECT_EQ(grads.size(), names.size()) << "the trained parameters are exactly PyTorch's";
  double worst = 0;
  std::string worst_name;
  for (const auto& [initializer, param_json] : names.items()) {
    const std::string param = param_json.get<std::string>();
    auto g = grads.find(initializer);
    ASSERT_NE(g, grads.end()) << initializer << " (PyTorch's " << param << ") gets no gradient";
    const Tensor& g64 = *ref.find("grad64/" + param);
    const Tensor& g32 = *ref.find("grad32/" + param);
    ASSERT_EQ(g->second.sizes(), g64.sizes()) << initializer;
    const double error = max_abs_difference(g->second, g64);
    const double bound = 10 * max_abs_difference(g32, g64) + 1e-6 * max_abs(g64) + 1e-9 * largest;
    EXPECT_LE(error, bound) << initializer << ": max |g - g64| " << error << ", PyTorch float32's "
                            << max_abs_difference(g32, g64) << ", max |g64| " << max_abs(g64);
    if (error / bound > worst) worst = error / bound, worst_name = initializer;
  }
  std::printf("%s: loss %.6f (PyTorch float64 %.6f); %zu gradients; worst tensor %s at %.2f of its bound\n",
              file.c_str(), loss, loss64, grads.size(), worst_name.c_str(), worst);
}

TEST_P(HuggingFaceExport, FirstStepGradientsMatchPyTorch) { expect_first_step_gradients_match_pytorch(GetParam()); }

// Ten AdamW steps (lr 1e-3, weight decay 0.01, torch's betas and eps) on the reference batch: the loss
// before each step and after the last, and every weight after the ten, against PyTorch's float64 run,
// with the rule of models/transformers/README.md. Its extra terms: 1e-4·steps·lr, because Adam amplifies
// round-off where a gradient is near eps; and for tensors holding a gradient that is exactly zero in
// float64 terms (0 < |g64| <= 1e-12·G: attention key biases) steps·lr·1e-9·G/eps, because Adam turns
// their float32 round-off into lr-sized moves.
TEST_P(HuggingFaceExport, TenAdamWStepsMatchPyTorch) {
  const std::string file = GetParam();
  Export e = load_export(file);
  const NpzArchive& ref = e.ref;
  const nlohmann::json& names = e.names;
  const DataInputs& x = e.x;
  const Tensor& labels = e.labels;
  constexpr int kSteps = 10;
  constexpr double kLr = 1e-3, kEps = 1e-8;

  TrainerOptions options;
  options.loss.classes_last = labels.rank() == 2;
  apply_optimizer_name("adamw", options.optimizer);
  options.optimizer.weight_decay = 0.01;
  options.schedule.base_lr = kLr;
  Trainer trainer(e.model.graph, options);
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) losses.push_back(trainer.train_step(x, labels));
  float last = 0;
  trainer.compute_gradients(x, labels, &last);
  losses.push_back(last);

  const std::vector<double> l64 = ref.find("adamw_losses64")->to_double(),
                            l32 = ref.find("adamw_losses32")->to_double();
  double worst_loss = 0;
  for (int t = 0; t <= kSteps; ++t) {
    const double bound = 10 * std::abs(l32[t] - l64[t]) + 1e-6 * std::abs(l64[t]);
    EXPECT_LE(std::abs(losses[t] - l64[t]), bound) << "loss after " << t << " steps: " << losses[t] << " vs " << l64[t];
    worst_loss = std::max(worst_loss, std::abs(losses[t] - l64[t]) / bound);
  }
  const double largest = largest_gradient(e);
  const std::map<std::string, Tensor> weights = trainer.trained_initializers();
  double worst = 0;
  std::string worst_name;
  for (const auto& [initializer, param_json] : names.items()) {
    const std::string param = param_json.get<std::string>();
    const Tensor& w64 = *ref.find("adamw_after64/" + param);
    const Tensor& w32 = *ref.find("adamw_after32/" + param);
    const std::vector<double> g64 = ref.find("grad64/" + param)->to_double();
    const bool zero_gradient =
        std::any_of(g64.begin(), g64.end(), [&](double g) { return g != 0 && std::abs(g) <= 1e-12 * largest; });
    double bound = 10 * max_abs_difference(w32, w64) + 1e-6 * max_abs(w64) + 1e-4 * kSteps * kLr;
    if (zero_gradient) bound += kSteps * kLr * 1e-9 * largest / kEps;
    const double error = max_abs_difference(weights.at(initializer), w64);
    EXPECT_LE(error, bound) << initializer << " after " << kSteps << " steps: max |w - w64| " << error;
    if (error / bound > worst) worst = error / bound, worst_name = initializer;
  }
  std::printf(
      "%s: 10 AdamW steps, loss %.6f -> %.6f (PyTorch float64 %.6f -> %.6f); worst loss at %.2f of its bound, "
      "worst weight %s at %.2f\n",
      file.c_str(), losses.front(), losses.back(), l64.front(), l64.back(), worst_loss, worst_name.c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Exports, HuggingFaceExport,
                         ::testing::Values("gpt2_torchscript.onnx", "gpt2_dynamo.onnx", "bert_torchscript.onnx",
                                           "bert_dynamo.onnx", "bert_masked_torchscript.onnx",
                                           "bert_masked_dynamo.onnx", "vit_torchscript.onnx", "vit_dynamo.onnx",
                                           "llama_torchscript.onnx", "llama_dynamo.onnx"),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.find('.'));
                           return n;
                         });

// T5 reads input_ids and decoder_input_ids (its reference has no AdamW steps): the first step's gradients.
class EncoderDecoderExport : public ::testing::TestWithParam<std::string> {};

TEST_P(EncoderDecoderExport, FirstStepGradientsMatchPyTorch) { expect_first_step_gradients_match_pytorch(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Exports, EncoderDecoderExport, ::testing::Values("t5_torchscript.onnx", "t5_dynamo.onnx"),
                         [](const auto& info) { return info.param.substr(0, info.param.find('.')); });

// A batch that does not name a multi-input model's inputs is refused, naming them.
TEST(HuggingFaceExport, AnUnnamedBatchForSeveralInputsIsRefusedNamingThem) {
  Export e = load_export("bert_masked_torchscript.onnx");
  Trainer trainer(e.model.graph, TrainerOptions{});
  try {
    trainer.train_step(e.x.first(), e.labels);
    ADD_FAILURE() << "an unnamed tensor fed three inputs";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what())
                  .find("the model reads 3 data inputs ('input_ids', 'attention_mask', "
                        "'token_type_ids'): a batch must name each"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace onnxtrain
