// The "cpu" data-movement kernels against the reference kernels on the shapes that matter in training:
// transformer activations (64,16,128) and heads (64,16,4,32), an embedding gather, ResNet maps (32,16,32,32)
// (Pad, Concat), their backward ops, and Cast. Counters (wall clock): GB/s (bytes read + written per call,
// ours), ref_GB/s (the reference kernel's) and speedup (reference time / ours, each the best of a few
// alternating rounds, so that load from other processes skews neither side).
//
//   cpu_data_movement_bench --benchmark_min_time=0.05      (OMP_NUM_THREADS=1 for one thread)
#include <benchmark/benchmark.h>

#include <cstring>
#include <functional>

#include "benchmarks/bench_common.h"
#include "kernels/kernel.h"

using namespace onnxtrain;
using Ints = std::vector<int64_t>;

namespace {

using bench::random_tensor;

Tensor ints(const Ints& v) { return Tensor::vector_int64(v); }

struct Call {
  std::string op;
  Attributes attributes;
  std::vector<Tensor> inputs;  // a default Tensor is an omitted optional input
  std::vector<TensorDesc> outputs;
  std::string domain;
  int opset = 18;
};

// A prepared kernel of `implementation` ("" = the default, "cpu") bound to its buffers; a call times run() only.
std::function<void()> bound_kernel(const Call& c, const std::string& implementation) {
  KernelSpec spec{
      .op_type = c.op, .domain = c.domain, .opset = c.domain.empty() ? c.opset : 1, .attributes = c.attributes};
  spec.outputs = c.outputs;
  return bench::kernel_call(spec, c.inputs, implementation);
}

void measure(benchmark::State& state, const Call& c) {
  const std::function<void()> ours = bound_kernel(c, ""), reference = bound_kernel(c, "reference");
  ours();
  for (auto _ : state) ours();
  const bench::BestSeconds best = bench::alternating_best(ours, reference);
  const double bytes = bench::bytes_moved(c.inputs, c.outputs);
  state.counters["GB/s"] = bench::rate_counter(bytes);
  state.counters["ref_GB/s"] = bytes * 1e-9 / best.reference;
  state.counters["speedup"] = best.reference / best.ours;
}

TensorDesc f32(const Ints& sizes) { return {DType::Float32, sizes}; }

std::vector<std::pair<std::string, Call>> calls() {
  const DType F = DType::Float32;
  std::vector<std::pair<std::string, Call>> list;
  auto add = [&](std::string name, Call c) { list.emplace_back(std::move(name), std::move(c)); };
  // --- transformer ---
  add("Transpose/heads_(64,16,4,32)_0213",
      {"Transpose", {{"perm", Ints{0, 2, 1, 3}}}, {random_tensor(F, {64, 16, 4, 32})}, {f32({64, 4, 16, 32})}});
  add("Transpose/keys_(64,4,16,32)_0132",
      {"Transpose", {{"perm", Ints{0, 1, 3, 2}}}, {random_tensor(F, {64, 4, 16, 32})}, {f32({64, 4, 32, 16})}});
  // torchvision's VisionTransformer (batch 32, 65 tokens, 8 heads of 32) as TorchScript exports its
  // attention: (T, B*H, d) <-> (B*H, T, d) rows of 32 floats, and the keys' last two dims swapped.
  add("Transpose/vit_heads_(65,256,32)_102",
      {"Transpose", {{"perm", Ints{1, 0, 2}}}, {random_tensor(F, {65, 256, 32})}, {f32({256, 65, 32})}});
  add("Transpose/vit_keys_(32,8,65,32)_0132",
      {"Transpose", {{"perm", Ints{0, 1, 3, 2}}}, {random_tensor(F, {32, 8, 65, 32})}, {f32({32, 8, 32, 65})}});
  add("Transpose/(1024,1024)_10", {"Transpose", {}, {random_tensor(F, {1024, 1024})}, {f32({1024, 1024})}});
  add("Transpose/nchw_to_nhwc_(32,16,32,32)",
      {"Transpose", {{"perm", Ints{0, 2, 3, 1}}}, {random_tensor(F, {32, 16, 32, 32})}, {f32({32, 32, 32, 16})}});
  add("Concat/(64,16,128)x2_axis2", {"Concat",
                                     {{"axis", int64_t{2}}},
                                     {random_tensor(F, {64, 16, 128}), random_tensor(F, {64, 16, 128})},
                                     {f32({64, 16, 256})}});
  add("Split/(64,16,384)_to_3x128", {"Split",
                                     {{"axis", int64_t{2}}},
                                     {random_tensor(F, {64, 16, 384}), ints({128, 128, 128})},
                                     {f32({64, 16, 128}), f32({64, 16, 128}), f32({64, 16, 128})}});
  add("Slice/(64,16,128)_last_step2", {"Slice",
                                       {},
                                       {random_tensor(F, {64, 16, 128}), ints({0}), ints({128}), ints({2}), ints({2})},
                                       {f32({64, 16, 64})}});
  add("Slice/(64,16,128)_rows_1to15", {"Slice",
                                       {},
                                       {random_tensor(F, {64, 16, 128}), ints({1}), ints({15}), ints({1}), Tensor()},
                                       {f32({64, 14, 128})}});
  Tensor ids(DType::Int64, {64, 16});
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 7919) % 8000;
  add("Gather/embedding_(8000,128)_by_(64,16)",
      {"Gather", {{"axis", int64_t{0}}}, {random_tensor(F, {8000, 128}), ids}, {f32({64, 16, 128})}});
  add("GatherGrad/embedding_(8000,128)_by_(64,16)", {"GatherGrad",
                                                     {{"axis", int64_t{0}}},
                                                     {random_tensor(F, {64, 16, 128}), ints({8000, 128}), ids},
                                                     {f32({8000, 128})},
                                                     "ai.onnxtrain"});
  add("SliceGrad/(64,16,128)_last_step2",
      {"SliceGrad",
       {},
       {random_tensor(F, {64, 16, 64}), ints({64, 16, 128}), ints({0}), ints({128}), ints({2}), ints({2})},
       {f32({64, 16, 128})},
       "ai.onnxtrain"});
  add("Expand/(64,1,128)_to_(64,16,128)",
      {"Expand", {}, {random_tensor(F, {64, 1, 128}), ints({64, 16, 128})}, {f32({64, 16, 128})}});
  add("Tile/(64,16,128)_x(1,2,1)",
      {"Tile", {}, {random_tensor(F, {64, 16, 128}), ints({1, 2, 1})}, {f32({64, 32, 128})}});
  add("Reshape/(64,16,128)_to_(64,16,4,32)",
      {"Reshape", {}, {random_tensor(F, {64, 16, 128}), ints({64, 16, 4, 32})}, {f32({64, 16, 4, 32})}});
  // --- ResNet ---
  for (const char* mode : {"constant", "reflect"}) {
    add(std::string("Pad/") + mode + "_(32,16,32,32)_hw1",
        {"Pad",
         {{"mode", std::string(mode)}},
         {random_tensor(F, {32, 16, 32, 32}), ints({0, 0, 1, 1, 0, 0, 1, 1})},
         {f32({32, 16, 34, 34})}});
    add(std::string("PadGrad/") + mode + "_(32,16,32,32)_hw1",
        {"PadGrad",
         {{"mode", std::string(mode)}},
         {random_tensor(F, {32, 16, 34, 34}), ints({32, 16, 32, 32}), ints({0, 0, 1, 1, 0, 0, 1, 1})},
         {f32({32, 16, 32, 32})},
         "ai.onnxtrain"});
  }
  add("Concat/(32,16,32,32)x2_axis1", {"Concat",
                                       {{"axis", int64_t{1}}},
                                       {random_tensor(F, {32, 16, 32, 32}), random_tensor(F, {32, 16, 32, 32})},
                                       {f32({32, 32, 32, 32})}});
  // --- Cast ---
  const Ints act = {64, 16, 128};
  add("Cast/f32_to_f16_(64,16,128)", {"Cast", {{"to", int64_t{10}}}, {random_tensor(F, act)}, {{DType::Float16, act}}});
  add("Cast/f16_to_f32_(64,16,128)",
      {"Cast", {{"to", int64_t{1}}}, {random_tensor(DType::Float16, act)}, {{DType::Float32, act}}});
  add("Cast/f32_to_bf16_(64,16,128)",
      {"Cast", {{"to", int64_t{16}}}, {random_tensor(F, act)}, {{DType::BFloat16, act}}});
  // The ViT's in-projection output (batch 32 of 65 tokens, 3 x 256), which autocast casts back from bfloat16.
  const Ints projection = {32, 65, 768};
  add("Cast/f32_to_bf16_(32,65,768)",
      {"Cast", {{"to", int64_t{16}}}, {random_tensor(F, projection)}, {{DType::BFloat16, projection}}});
  add("Cast/bf16_to_f32_(32,65,768)",
      {"Cast", {{"to", int64_t{1}}}, {random_tensor(DType::BFloat16, projection)}, {{DType::Float32, projection}}});
  add("Cast/f32_to_i64_(64,16,128)", {"Cast", {{"to", int64_t{7}}}, {random_tensor(F, act)}, {{DType::Int64, act}}});
  add("Cast/i64_to_f32_(64,16,128)",
      {"Cast", {{"to", int64_t{1}}}, {random_tensor(DType::Int64, act)}, {{DType::Float32, act}}});
  return list;
}

void register_all() {
  for (auto& [name, call] : calls()) {
    benchmark::RegisterBenchmark(name.c_str(), [c = call](benchmark::State& state) { measure(state, c); })
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();  // the threads' wall time, not the main thread's CPU time
  }
}

}  // namespace

int main(int argc, char** argv) { return bench::run_benchmarks(argc, argv, &register_all); }
