// The "cpu" reduction kernels (kernels/cpu/reduce.cc, reduce_arg.cc) against the reference kernels on the
// reductions training graphs run: bias gradients of a transformer's (64, 16, 128) activations over (0, 1)
// and a ResNet's (32, 16, 32, 32) maps over (0, 2, 3), softmax-style reductions over the last axis
// (oneDNN's jit reduction for Sum/Mean), a middle axis, reduce-all and ArgMax. Counters: GB (input
// bytes read per second: GB/s, the bound of a reduction), best_GBps (the same for our best of 20 runs before
// the timed loop: on a shared machine the mean hides it), speedup_vs_reference (the reference kernel's best
// of 3 runs over our best of 20).
//
//   OMP_NUM_THREADS=1 cpu_reductions_bench --benchmark_min_time=0.1
#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>
#include <memory>

#include "benchmarks/bench_common.h"
#include "kernels/kernel.h"

using namespace onnxtrain;
using Ints = std::vector<int64_t>;

namespace {

struct Prepared {
  std::unique_ptr<Kernel> kernel;
  std::vector<Tensor> tensors;  // inputs then the output
  std::vector<TensorView> in, out;
  void run() {
    Stream stream;
    kernel->run(stream, in, out);
  }
};

std::unique_ptr<Prepared> prepare(const std::string& op, const Ints& sizes, const Ints& axes, bool keepdims,
                                  const std::string& implementation) {
  auto p = std::make_unique<Prepared>();
  Tensor x = bench::random_tensor(DType::Float32, sizes);
  const bool arg = op == "ArgMax" || op == "ArgMin";
  const auto rank = static_cast<int64_t>(sizes.size());
  std::vector<bool> reduced(sizes.size(), axes.empty());
  for (int64_t a : axes) reduced[a < 0 ? a + rank : a] = true;
  Ints out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d])
      out.push_back(sizes[d]);
    else if (keepdims)
      out.push_back(1);
  }
  KernelSpec spec{.op_type = op, .opset = 18};
  spec.attributes["keepdims"] = int64_t{keepdims ? 1 : 0};
  spec.inputs.push_back({DType::Float32, sizes});
  p->tensors.push_back(std::move(x));
  if (arg) {
    spec.attributes["axis"] = axes.at(0);
  } else {
    Tensor a(DType::Int64, {static_cast<int64_t>(axes.size())});
    std::copy(axes.begin(), axes.end(), a.data<int64_t>().begin());
    spec.inputs.push_back({DType::Int64, a.sizes()});
    p->tensors.push_back(std::move(a));
  }
  const DType out_dtype = arg ? DType::Int64 : DType::Float32;
  spec.outputs.push_back({out_dtype, out});
  p->tensors.emplace_back(out_dtype, out);
  const KernelEntry* entry = KernelRegistry::builtin().find("", op, DeviceKind::Cpu, DType::Float32, implementation);
  p->kernel = entry->prepare(spec);
  for (size_t i = 0; i + 1 < p->tensors.size(); ++i) p->in.push_back(TensorView::of(p->tensors[i]));
  p->out.push_back(TensorView::of(p->tensors.back()));
  return p;
}

double best_seconds(Prepared& p, int runs) {
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    p.run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void bench_reduce(benchmark::State& state, const std::string& op, const Ints& sizes, const Ints& axes) {
  auto ours = prepare(op, sizes, axes, true, "");
  auto reference = prepare(op, sizes, axes, true, "reference");
  const double reference_s = best_seconds(*reference, 3);
  const double ours_s = best_seconds(*ours, 20);
  for (auto _ : state) ours->run();
  const auto bytes = static_cast<double>(ours->tensors[0].numel()) * sizeof(float);
  state.counters["GB"] =
      benchmark::Counter(bytes * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.counters["best_GBps"] = bytes / ours_s / 1e9;  // the best single run: what a busy machine hides
  state.counters["speedup_vs_reference"] = reference_s / ours_s;
}

void register_all() {
  struct Case {
    const char* name;
    const char* op;
    Ints sizes, axes;
  };
  const std::vector<Case> cases = {
      {"ReduceSum/transformer_bias_grad(64,16,128)/axes(0,1)", "ReduceSum", {64, 16, 128}, {0, 1}},
      {"ReduceSum/resnet_bias_grad(32,16,32,32)/axes(0,2,3)", "ReduceSum", {32, 16, 32, 32}, {0, 2, 3}},
      {"ReduceSum/(4096,1000)/axes(0)", "ReduceSum", {4096, 1000}, {0}},
      {"ReduceSum/(64,16,128)/axes(-1)_onednn", "ReduceSum", {64, 16, 128}, {-1}},
      {"ReduceSum/(64,16,128)/axes(1)", "ReduceSum", {64, 16, 128}, {1}},
      {"ReduceSum/(32,16,32,32)/all", "ReduceSum", {32, 16, 32, 32}, {0, 1, 2, 3}},
      {"ReduceMean/(64,16,128)/axes(-1)_onednn", "ReduceMean", {64, 16, 128}, {-1}},
      {"ReduceMean/(32,16,32,32)/axes(2,3)_onednn", "ReduceMean", {32, 16, 32, 32}, {2, 3}},
      {"ReduceMax/(64,16,128)/axes(-1)", "ReduceMax", {64, 16, 128}, {-1}},
      {"ReduceMax/(32,16,32,32)/axes(0,2,3)", "ReduceMax", {32, 16, 32, 32}, {0, 2, 3}},
      {"ReduceLogSumExp/(64,16,128)/axes(-1)", "ReduceLogSumExp", {64, 16, 128}, {-1}},
      {"ReduceLogSumExp/(64,16,128)/axes(0)", "ReduceLogSumExp", {64, 16, 128}, {0}},
      {"ReduceSumSquare/(32,16,32,32)/axes(0,2,3)", "ReduceSumSquare", {32, 16, 32, 32}, {0, 2, 3}},
      {"ReduceL2/(64,16,128)/axes(-1)", "ReduceL2", {64, 16, 128}, {-1}},
      {"ReduceL1/(64,16,128)/axes(-1)_own_rows", "ReduceL1", {64, 16, 128}, {-1}},  // vs oneDNN's ReduceSum
      {"ReduceL1/(32,16,32,32)/axes(2,3)_own_rows", "ReduceL1", {32, 16, 32, 32}, {2, 3}},
      {"ArgMax/(64,16,128)/axis(-1)", "ArgMax", {64, 16, 128}, {-1}},
      {"ArgMax/(64,16,128)/axis(1)", "ArgMax", {64, 16, 128}, {1}},
  };
  for (const Case& c : cases) {
    benchmark::RegisterBenchmark(c.name, [c](benchmark::State& state) { bench_reduce(state, c.op, c.sizes, c.axes); })
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
}

}  // namespace

int main(int argc, char** argv) { return bench::run_benchmarks(argc, argv, &register_all); }
