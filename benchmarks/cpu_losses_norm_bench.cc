// The "cpu" loss and normalisation kernels against the reference kernels, float32: SoftmaxCrossEntropyLoss
// and its Grad on classifier (64,10), language-model (1024,1000) rows and (N,C,D) scores both ways round,
// NegativeLogLikelihoodLoss(Grad), InstanceNormalization(Grad) on ResNet (32,16,32,32) maps and transformer
// (64,16,128) activations, MaxPool(Grad) on ResNet's stem pool, ConvTranspose (oneDNN deconvolution) on DCGAN-like
// layers. Counters: GB/s (bytes the op must read and write) or GFLOP/s (ConvTranspose), and for the cpu kernels
// speedup_vs_reference (reference time / cpu time, the reference timed over a few calls beforehand), all
// on wall-clock time (the cpu kernels run on several threads).
// Threads: OMP_NUM_THREADS (the reference kernels use one).
//
//   OMP_NUM_THREADS=1 cpu_losses_norm_bench --benchmark_min_time=0.05
#include <benchmark/benchmark.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "benchmarks/bench_common.h"
#include "graph/op_schema.h"
#include "kernels/kernel.h"

using namespace onnxtrain;
using Ints = std::vector<int64_t>;

namespace {

Tensor random_tensor(const Ints& sizes, float lo = -3, float hi = 3) {
  return bench::random_tensor(DType::Float32, sizes, lo, hi);
}

Tensor labels(const Ints& sizes, int64_t classes) {
  static std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> dist(0, classes - 1);
  Tensor t(DType::Int64, sizes);
  for (int64_t& v : t.data<int64_t>()) v = dist(rng);
  return t;
}

struct Op {
  std::string domain, op;
  int opset = 17;
  Attributes attributes;
  std::vector<Tensor> inputs;  // a default Tensor is an omitted input
  std::vector<Ints> outputs;
};

// The kernel of `implementation` ("" = the default, the cpu kernel) prepared for `op`, as a call.
std::function<void()> kernel_call(const Op& op, const std::string& implementation) {
  KernelSpec spec{.op_type = op.op, .domain = op.domain, .opset = op.opset, .attributes = op.attributes};
  for (const Ints& s : op.outputs) spec.outputs.push_back({DType::Float32, s});
  return bench::kernel_call(spec, op.inputs, implementation, DType::Float32);
}

// Seconds per call of fn over at least `seconds` and two calls.
double seconds_per_call(const std::function<void()>& fn, double seconds) {
  return bench::seconds_per_call(fn, seconds, 2);
}

// Registers cpu/<name> and reference/<name>; `amount` bytes (GB/s) or FLOPs (GFLOP/s) per call.
void add(const std::string& name, const std::function<Op()>& make, double amount, bool flops = false) {
  const char* unit = flops ? "GFLOP/s" : "GB/s";
  benchmark::RegisterBenchmark(("cpu/" + name).c_str(), [=](benchmark::State& state) {
    const Op op = make();
    const std::function<void()> ours = kernel_call(op, ""), reference = kernel_call(op, "reference");
    const double reference_seconds = seconds_per_call(reference, 0.1);
    ours();
    for (auto _ : state) ours();
    state.counters[unit] = bench::rate_counter(amount);
    state.counters["speedup_vs_reference"] = reference_seconds / seconds_per_call(ours, 0.05);
  })->UseRealTime();
  benchmark::RegisterBenchmark(("reference/" + name).c_str(), [=](benchmark::State& state) {
    const std::function<void()> reference = kernel_call(make(), "reference");
    reference();
    for (auto _ : state) reference();
    state.counters[unit] = bench::rate_counter(amount);
  })->UseRealTime();
}

std::string shape_name(const Ints& s) {
  std::string n;
  for (int64_t v : s) n += (n.empty() ? "" : "x") + std::to_string(v);
  return n;
}

void register_all() {
  for (const Ints& scores : {Ints{64, 10}, Ints{1024, 1000}, Ints{64, 16, 1000}, Ints{64, 1000, 16}}) {
    Ints per_element = scores;
    per_element.erase(per_element.begin() + 1);
    int64_t numel = 1, elements = 1;
    for (int64_t v : scores) numel *= v;
    for (int64_t v : per_element) elements *= v;
    const double in_bytes = 4.0 * numel + 8.0 * elements;
    add(
        "SoftmaxCrossEntropyLoss/" + shape_name(scores),
        [=] {
          return Op{"",  "SoftmaxCrossEntropyLoss", 13, {}, {random_tensor(scores), labels(per_element, scores[1])},
                    {{}}};
        },
        in_bytes);
    add(
        "SoftmaxCrossEntropyLoss_log_prob/" + shape_name(scores),
        [=] {
          return Op{
              "",          "SoftmaxCrossEntropyLoss", 13, {}, {random_tensor(scores), labels(per_element, scores[1])},
              {{}, scores}};
        },
        in_bytes + 4.0 * numel);
    add(
        "SoftmaxCrossEntropyLossGrad/" + shape_name(scores),
        [=] {
          return Op{kTrainingDomain,
                    "SoftmaxCrossEntropyLossGrad",
                    1,
                    {},
                    {random_tensor({}), random_tensor(scores, -8, 0), labels(per_element, scores[1])},
                    {scores}};
        },
        in_bytes + 4.0 * numel);
  }
  // Attention's scores (the ViT's: 32 images x 8 heads, 65 x 65) normalised over the last axis: the default
  // Softmax kernel there is kernels/cpu/row_softmax.h (with AVX-512). Bytes read and written.
  const Ints attention{32, 8, 65, 65};
  add(
      "Softmax/" + shape_name(attention),
      [=] {
        return Op{"", "Softmax", 13, {{"axis", int64_t{-1}}}, {random_tensor(attention, -8, 8)}, {attention}};
      },
      8.0 * 32 * 8 * 65 * 65);
  for (const Ints& scores : {Ints{1024, 1000}, Ints{64, 16, 1000}}) {
    Ints per_element = scores;
    per_element.erase(per_element.begin() + 1);
    int64_t numel = 1, elements = 1;
    for (int64_t v : scores) numel *= v;
    for (int64_t v : per_element) elements *= v;
    add(
        "NegativeLogLikelihoodLoss/" + shape_name(scores),
        [=] {
          return Op{"",  "NegativeLogLikelihoodLoss", 13, {}, {random_tensor(scores), labels(per_element, scores[1])},
                    {{}}};
        },
        12.0 * elements);  // a label and its score per element
    add(
        "NegativeLogLikelihoodLossGrad/" + shape_name(scores),
        [=] {
          Tensor shape(DType::Int64, {static_cast<int64_t>(scores.size())});
          for (size_t i = 0; i < scores.size(); ++i) shape.data<int64_t>()[i] = scores[i];
          return Op{kTrainingDomain,
                    "NegativeLogLikelihoodLossGrad",
                    1,
                    {},
                    {random_tensor({}), labels(per_element, scores[1]), shape},
                    {scores}};
        },
        8.0 * elements + 4.0 * numel);
  }
  for (const Ints& x : {Ints{32, 16, 32, 32}, Ints{64, 16, 128}}) {
    int64_t numel = 1;
    for (int64_t v : x) numel *= v;
    const Ints c{x[1]};
    add(
        "InstanceNormalization/" + shape_name(x),
        [=] {
          return Op{"", "InstanceNormalization", 6, {}, {random_tensor(x), random_tensor(c), random_tensor(c)}, {x}};
        },
        8.0 * numel);
    add(
        "InstanceNormalizationGrad/" + shape_name(x),
        [=] {
          return Op{kTrainingDomain,
                    "InstanceNormalizationGrad",
                    1,
                    {},
                    {random_tensor(x), random_tensor(x), random_tensor(c)},
                    {x, c, c}};
        },
        12.0 * numel);
  }
  // ResNet's stem pool (3x3, stride 2, pads 1) at 32x32 and at 224x224 inputs: GB/s of X and Y (and dY, dX).
  for (const Ints& x : {Ints{32, 64, 16, 16}, Ints{16, 64, 112, 112}}) {
    const Ints y{x[0], x[1], (x[2] - 1) / 2 + 1, (x[3] - 1) / 2 + 1};
    const double bytes = 4.0 * static_cast<double>(x[0] * x[1]) * static_cast<double>(x[2] * x[3] + y[2] * y[3]);
    const Attributes pool{{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}};
    add(
        "MaxPool/" + shape_name(x), [=] { return Op{"", "MaxPool", 17, pool, {random_tensor(x)}, {y}}; }, bytes);
    add(
        "MaxPoolGrad/" + shape_name(x),
        [=] {
          return Op{kTrainingDomain, "MaxPoolGrad", 17, pool, {random_tensor(y), random_tensor(x)}, {x}};
        },
        2 * bytes);
  }
  struct Deconv {
    std::string name;
    Ints x, w, y;
    Attributes attributes;
  };
  for (const Deconv& d : std::vector<Deconv>{{"8x64x16x16_to_32x32x32_k4s2p1",
                                              {8, 64, 16, 16},
                                              {64, 32, 4, 4},
                                              {8, 32, 32, 32},
                                              {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
                                             {"8x16x32x32_to_16x32x32_k3s1p1",
                                              {8, 16, 32, 32},
                                              {16, 16, 3, 3},
                                              {8, 16, 32, 32},
                                              {{"pads", Ints{1, 1, 1, 1}}}}}) {
    double flops = 2.0;
    for (int64_t v : d.x) flops *= static_cast<double>(v);
    for (size_t i = 1; i < d.w.size(); ++i) flops *= static_cast<double>(d.w[i]);
    add(
        "ConvTranspose/" + d.name,
        [=] {
          return Op{"",
                    "ConvTranspose",
                    17,
                    d.attributes,
                    {random_tensor(d.x), random_tensor(d.w), random_tensor({d.y[1]})},
                    {d.y}};
        },
        flops, /*flops=*/true);
  }
}

}  // namespace

int main(int argc, char** argv) { return bench::run_benchmarks(argc, argv, &register_all); }
