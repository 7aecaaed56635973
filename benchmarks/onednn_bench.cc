// One-thread forward GFLOP/s of our oneDNN Conv and Gemm kernels on the Conv and Gemm shapes of
// models/resnet_opset17.onnx (batch 32) and a 1024³ SGEMM, next to oneDNN's own primitive called directly
// (best layouts, no reorders, no wrapper) and the machine's fp32 peak as a 2048³ oneDNN matmul reaches it.
// The same for the backward pass (bwd/...): our ai.onnxtrain ConvGrad kernel (dX, dW and dB from plain
// buffers) against oneDNN's convolution_backward_data + convolution_backward_weights alone, and Gemm's
// two gradient Gemms (what the Gemm gradient rule emits) against two raw matmuls; FLOPs = 2x forward.
// Counters: GFLOP/s, and for our kernels ratio_to_raw_onednn (raw time / our time, each the best of a few
// alternating rounds; the issues ask >= 0.5).
//
//   onednn_bench --benchmark_min_time=0.05
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>

#include "benchmarks/bench_common.h"
#include "kernels/kernel.h"

using namespace onnxtrain;
using dnnl::memory;
using Ints = std::vector<int64_t>;

namespace {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Tensor random_tensor(const Ints& sizes) {
  static std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t(DType::Float32, sizes);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

memory filled(const memory::desc& md) {
  memory m(md, engine());
  float* p = static_cast<float*>(m.get_data_handle());
  for (size_t i = 0; i < md.get_size() / sizeof(float); ++i) p[i] = 0.001f * static_cast<float>(i % 1000);
  return m;
}

// Our kernel of (domain, op), through the registry, over plain host tensors.
std::function<void()> our_kernel(const std::string& domain, const std::string& op, Attributes attrs,
                                 const std::vector<Ints>& inputs, const std::vector<Ints>& outputs) {
  KernelSpec spec{.op_type = op, .domain = domain, .opset = domain.empty() ? 17 : 1, .attributes = std::move(attrs)};
  auto tensors = std::make_shared<std::vector<Tensor>>();
  for (const Ints& s : inputs) {
    tensors->push_back(random_tensor(s));
    spec.inputs.push_back({DType::Float32, s});
  }
  for (const Ints& s : outputs) {
    tensors->push_back(Tensor(DType::Float32, s));
    spec.outputs.push_back({DType::Float32, s});
  }
  const KernelEntry* entry = KernelRegistry::builtin().find(domain, op, DeviceKind::Cpu, DType::Float32, "onednn");
  std::shared_ptr<Kernel> kernel = entry->prepare(spec);
  // The views are made once, as the raw primitive's arguments are: a call times only the kernel's run.
  auto in = std::make_shared<std::vector<TensorView>>();
  for (size_t i = 0; i < inputs.size(); ++i) in->push_back(TensorView::of((*tensors)[i]));
  auto outs = std::make_shared<std::vector<TensorView>>();
  for (size_t i = inputs.size(); i < tensors->size(); ++i) outs->push_back(TensorView::of((*tensors)[i]));
  auto stream = std::make_shared<Stream>();
  return [kernel, tensors, in, outs, stream] { kernel->run(*stream, *in, *outs); };
}

std::function<void()> our_kernel(const std::string& op, Attributes attrs, const std::vector<Ints>& inputs,
                                 const Ints& out) {
  return our_kernel("", op, std::move(attrs), inputs, {out});
}

std::function<void()> raw_primitive(dnnl::primitive prim, std::unordered_map<int, memory> args) {
  return [prim, args] {
    static thread_local dnnl::stream stream(engine());
    prim.execute(stream, args);
    stream.wait();
  };
}

struct ConvShape {
  int64_t c, m, k, stride, in, pad;
  int64_t out() const { return (in + 2 * pad - k) / stride + 1; }
  double flops() const { return 2.0 * 32 * m * c * k * k * out() * out(); }
};

std::function<void()> raw_conv(const ConvShape& s) {
  const auto f32 = memory::data_type::f32;
  const auto any = memory::format_tag::any;
  dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
      memory::desc({32, s.c, s.in, s.in}, f32, any), memory::desc({s.m, s.c, s.k, s.k}, f32, any),
      memory::desc({s.m}, f32, memory::format_tag::a), memory::desc({32, s.m, s.out(), s.out()}, f32, any),
      {s.stride, s.stride}, {0, 0}, {s.pad, s.pad}, {s.pad, s.pad});
  dnnl::convolution_forward::primitive_desc pd(desc, engine());
  return raw_primitive(dnnl::convolution_forward(pd), {{DNNL_ARG_SRC, filled(pd.src_desc())},
                                                       {DNNL_ARG_WEIGHTS, filled(pd.weights_desc())},
                                                       {DNNL_ARG_BIAS, filled(pd.bias_desc())},
                                                       {DNNL_ARG_DST, filled(pd.dst_desc())}});
}

// oneDNN's convolution_backward_data and convolution_backward_weights (with the bias gradient) alone, one
// after the other, each in the layouts it prefers given the forward hint.
std::function<void()> raw_conv_backward(const ConvShape& s) {
  const auto f32 = memory::data_type::f32;
  const auto any = memory::format_tag::any;
  const memory::desc x({32, s.c, s.in, s.in}, f32, any), w({s.m, s.c, s.k, s.k}, f32, any);
  const memory::desc y({32, s.m, s.out(), s.out()}, f32, any), b({s.m}, f32, memory::format_tag::a);
  const memory::dims strides{s.stride, s.stride}, dilations{0, 0}, pads{s.pad, s.pad};
  const auto direct = dnnl::algorithm::convolution_direct;
  dnnl::convolution_forward::primitive_desc hint(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, direct, x, w, b, y, strides, dilations, pads,
                                      pads),
      engine());
  dnnl::convolution_backward_data::primitive_desc data_pd(
      dnnl::convolution_backward_data::desc(direct, x, w, y, strides, dilations, pads, pads), engine(), hint);
  dnnl::convolution_backward_weights::primitive_desc weights_pd(
      dnnl::convolution_backward_weights::desc(direct, x, w, b, y, strides, dilations, pads, pads), engine(), hint);
  auto data =
      raw_primitive(dnnl::convolution_backward_data(data_pd), {{DNNL_ARG_DIFF_DST, filled(data_pd.diff_dst_desc())},
                                                               {DNNL_ARG_WEIGHTS, filled(data_pd.weights_desc())},
                                                               {DNNL_ARG_DIFF_SRC, filled(data_pd.diff_src_desc())}});
  auto weights = raw_primitive(dnnl::convolution_backward_weights(weights_pd),
                               {{DNNL_ARG_SRC, filled(weights_pd.src_desc())},
                                {DNNL_ARG_DIFF_DST, filled(weights_pd.diff_dst_desc())},
                                {DNNL_ARG_DIFF_WEIGHTS, filled(weights_pd.diff_weights_desc())},
                                {DNNL_ARG_DIFF_BIAS, filled(weights_pd.diff_bias_desc())}});
  return [data, weights] {
    data();
    weights();
  };
}

// (M,K)·(K,N), B stored transposed when trans_b, optional bias (N).
std::function<void()> raw_matmul(int64_t m, int64_t n, int64_t k, bool trans_b, bool bias, bool trans_a = false) {
  const auto f32 = memory::data_type::f32;
  const memory::desc a({m, k}, f32, trans_a ? memory::format_tag::ba : memory::format_tag::ab);
  const memory::desc y({m, n}, f32, memory::format_tag::ab);
  const memory::desc b({k, n}, f32, trans_b ? memory::format_tag::ba : memory::format_tag::ab);
  const memory::desc c = bias ? memory::desc({1, n}, f32, memory::format_tag::ab) : memory::desc();
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c, y), engine());
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, filled(a)}, {DNNL_ARG_WEIGHTS, filled(b)}, {DNNL_ARG_DST, filled(y)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, filled(c));
  return raw_primitive(dnnl::matmul(pd), args);
}

// Seconds per call of fn, over at least `seconds`.
double seconds_per_call(const std::function<void()>& fn, double seconds = 0.05) {
  return bench::seconds_per_call(fn, seconds);
}

void measure(benchmark::State& state, const std::function<void()>& fn, double flops,
             const std::function<void()>& raw = nullptr) {
  const double raw_seconds = raw ? seconds_per_call(raw) : 0;
  fn();
  for (auto _ : state) fn();
  state.counters["GFLOP/s"] = bench::rate_counter(flops);
  if (raw) {
    // Ours and raw alternate over a few rounds and each keeps its best round, so that load from other
    // processes on the machine skews neither side.
    double ours = seconds_per_call(fn), best_raw = raw_seconds;
    for (int round = 0; round < 4; ++round) {
      best_raw = std::min(best_raw, seconds_per_call(raw, 0.02));
      ours = std::min(ours, seconds_per_call(fn, 0.02));
    }
    state.counters["ratio_to_raw_onednn"] = best_raw / ours;
  }
}

// oneDNN's training batch norm alone on the channel-blocked layout it is fastest on (no reorders): the
// forward (statistics and normalisation), or the forward for the statistics and the backward (scale and
// shift gradients too), as our BatchNormalizationGrad computes them when no forward kept them.
std::function<void()> raw_batch_norm(const Ints& x, bool backward) {
  const memory::desc data(memory::dims(x.begin(), x.end()), memory::data_type::f32, memory::format_tag::nChw16c);
  const memory::desc stat({x[1]}, memory::data_type::f32, memory::format_tag::a);
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  const dnnl::batch_normalization_forward::primitive_desc forward(
      dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, data, 1e-5f, flags), engine());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, filled(data)},   {DNNL_ARG_DST, filled(data)},
                                       {DNNL_ARG_SCALE, filled(stat)}, {DNNL_ARG_SHIFT, filled(stat)},
                                       {DNNL_ARG_MEAN, filled(stat)},  {DNNL_ARG_VARIANCE, filled(stat)}};
  const std::function<void()> statistics = raw_primitive(dnnl::batch_normalization_forward(forward), args);
  if (!backward) return statistics;
  const dnnl::batch_normalization_backward::primitive_desc pd(
      dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, data, data, 1e-5f, flags), engine(), forward);
  args[DNNL_ARG_DIFF_DST] = filled(data);
  args[DNNL_ARG_DIFF_SRC] = filled(data);
  args[DNNL_ARG_DIFF_SCALE] = filled(stat);
  args[DNNL_ARG_DIFF_SHIFT] = filled(stat);
  const std::function<void()> gradient = raw_primitive(dnnl::batch_normalization_backward(pd), args);
  return [statistics, gradient] {
    statistics();
    gradient();
  };
}

void register_batch_norms() {
  // ResNet-18's at 32x32, batch 32: the stem's, layer1's, layer3's and layer4's.
  for (const Ints& x : {Ints{32, 64, 16, 16}, Ints{32, 64, 8, 8}, Ints{32, 256, 2, 2}, Ints{32, 512, 1, 1}}) {
    const Ints c{x[1]};
    std::string name = std::to_string(x[0]);
    for (size_t d = 1; d < x.size(); ++d) name += "x" + std::to_string(x[d]);
    const double elements = static_cast<double>(x[0] * x[1] * x[2] * x[3]);
    const Attributes training{{"training_mode", int64_t{1}}};
    benchmark::RegisterBenchmark(("ours/batch_norm_training_" + name).c_str(), [=](benchmark::State& state) {
      // FLOPs: about 8 per element (two passes of statistics, the normalisation)
      measure(state, our_kernel("", "BatchNormalization", training, {x, c, c, c, c}, {x, c, c}), 8 * elements,
              raw_batch_norm(x, false));
    });
    benchmark::RegisterBenchmark(("bwd/ours/batch_norm_training_" + name).c_str(), [=](benchmark::State& state) {
      measure(state, our_kernel("ai.onnxtrain", "BatchNormalizationGrad", training, {x, x, c, c, c}, {x, c, c}),
              16 * elements, raw_batch_norm(x, true));
    });
  }
}

void register_all() {
  register_batch_norms();
  const std::vector<std::pair<std::string, ConvShape>> convs = {{"conv_3to16_3x3_32x32", {3, 16, 3, 1, 32, 1}},
                                                                {"conv_16to16_3x3_32x32", {16, 16, 3, 1, 32, 1}},
                                                                {"conv_16to32_3x3_s2", {16, 32, 3, 2, 32, 1}},
                                                                {"conv_32to32_3x3_16x16", {32, 32, 3, 1, 16, 1}},
                                                                {"conv_16to32_1x1_s2", {16, 32, 1, 2, 32, 0}},
                                                                // ResNet-18's layer3 at 32x32 (tap_product_conv.h)
                                                                // ResNet-18's layer1 and layer2 at 32x32 (batch 32)
                                                                {"conv_64to64_3x3_8x8", {64, 64, 3, 1, 8, 1}},
                                                                {"conv_64to128_3x3_s2_8x8", {64, 128, 3, 2, 8, 1}},
                                                                {"conv_128to128_3x3_4x4", {128, 128, 3, 1, 4, 1}},
                                                                {"conv_256to256_3x3_2x2", {256, 256, 3, 1, 2, 1}},
                                                                {"conv_128to256_3x3_s2_4x4", {128, 256, 3, 2, 4, 1}}};
  for (const auto& [name, s] : convs) {
    benchmark::RegisterBenchmark(("ours/" + name).c_str(), [s = s](benchmark::State& state) {
      const Attributes attrs{{"strides", Ints{s.stride, s.stride}}, {"pads", Ints{s.pad, s.pad, s.pad, s.pad}}};
      measure(
          state,
          our_kernel("Conv", attrs, {{32, s.c, s.in, s.in}, {s.m, s.c, s.k, s.k}, {s.m}}, {32, s.m, s.out(), s.out()}),
          s.flops(), raw_conv(s));
    });
    benchmark::RegisterBenchmark(("raw/" + name).c_str(),
                                 [s = s](benchmark::State& state) { measure(state, raw_conv(s), s.flops()); });
  }
  for (const auto& [name, s] : convs) {
    const double flops = 2 * s.flops();  // backward data + backward weights
    benchmark::RegisterBenchmark(("bwd/ours/" + name).c_str(), [s = s, flops](benchmark::State& state) {
      const Attributes attrs{{"strides", Ints{s.stride, s.stride}}, {"pads", Ints{s.pad, s.pad, s.pad, s.pad}}};
      const Ints x{32, s.c, s.in, s.in}, w{s.m, s.c, s.k, s.k}, y{32, s.m, s.out(), s.out()};
      measure(state, our_kernel("ai.onnxtrain", "ConvGrad", attrs, {y, x, w}, {x, w, {s.m}}), flops,
              raw_conv_backward(s));
    });
    benchmark::RegisterBenchmark(("bwd/raw/" + name).c_str(), [s = s, flops](benchmark::State& state) {
      measure(state, raw_conv_backward(s), flops);
    });
  }
  // Gemm Y(32,10) = A(32,32)·B(10,32)ᵀ + C: dA = Gemm(dY, B), dB = Gemm(dY, A, transA=1), as the rule emits.
  const auto gemm_backward = [] {
    auto da = our_kernel("Gemm", {}, {{32, 10}, {10, 32}}, {32, 32});
    auto db = our_kernel("Gemm", {{"transA", int64_t{1}}}, {{32, 10}, {32, 32}}, {10, 32});
    return std::function<void()>([da, db] {
      da();
      db();
    });
  };
  const auto raw_gemm_backward = [] {
    auto da = raw_matmul(32, 32, 10, false, false);
    auto db = raw_matmul(10, 32, 32, false, false, /*trans_a=*/true);
    return std::function<void()>([da, db] {
      da();
      db();
    });
  };
  benchmark::RegisterBenchmark("bwd/ours/gemm_32x10x32_transB_bias", [=](benchmark::State& state) {
    measure(state, gemm_backward(), 2 * 2.0 * 32 * 10 * 32, raw_gemm_backward());
  });
  benchmark::RegisterBenchmark("bwd/raw/gemm_32x10x32_transB_bias", [=](benchmark::State& state) {
    measure(state, raw_gemm_backward(), 2 * 2.0 * 32 * 10 * 32);
  });
  benchmark::RegisterBenchmark("ours/gemm_32x10x32_transB_bias", [](benchmark::State& state) {
    measure(state, our_kernel("Gemm", {{"transB", int64_t{1}}}, {{32, 32}, {10, 32}, {10}}, {32, 10}),
            2.0 * 32 * 10 * 32, raw_matmul(32, 10, 32, true, true));
  });
  benchmark::RegisterBenchmark("raw/gemm_32x10x32_transB_bias", [](benchmark::State& state) {
    measure(state, raw_matmul(32, 10, 32, true, true), 2.0 * 32 * 10 * 32);
  });
  // ResNet-18's layer4 at 32x32 as trained (live taps: Gemm on W_live (N, K)) at R rows (1: one sample's
  // inference; 8: a pipeline's micro-batch; up to 8 the forward and dX run kernels/cpu/skinny_gemm.h):
  // forward Y = X·Wᵀ, dX = dY·W, dW = dYᵀ·X (transA), each against one raw matmul.
  for (const int64_t rows : {int64_t{1}, int64_t{8}, int64_t{16}, int64_t{32}}) {
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{512, 512}, {512, 1024}}) {
      const std::string shape = std::to_string(rows) + "x" + std::to_string(n) + "x" + std::to_string(k);
      const double flops = 2.0 * static_cast<double>(rows * n * k);
      benchmark::RegisterBenchmark(("skinny/fwd/" + shape).c_str(), [=](benchmark::State& state) {
        measure(state, our_kernel("Gemm", {{"transB", int64_t{1}}}, {{rows, k}, {n, k}}, {rows, n}), flops,
                raw_matmul(rows, n, k, true, false));
      });
      benchmark::RegisterBenchmark(("skinny/dx/" + shape).c_str(), [=](benchmark::State& state) {
        measure(state, our_kernel("Gemm", {}, {{rows, n}, {n, k}}, {rows, k}), flops,
                raw_matmul(rows, k, n, false, false));
      });
      benchmark::RegisterBenchmark(("skinny/dw/" + shape).c_str(), [=](benchmark::State& state) {
        measure(state, our_kernel("Gemm", {{"transA", int64_t{1}}}, {{rows, n}, {rows, k}}, {n, k}), flops,
                raw_matmul(n, k, rows, false, false, /*trans_a=*/true));
      });
    }
  }
  benchmark::RegisterBenchmark("ours/sgemm_1024", [](benchmark::State& state) {
    measure(state, our_kernel("Gemm", {}, {{1024, 1024}, {1024, 1024}}, {1024, 1024}), 2.0 * 1024 * 1024 * 1024,
            raw_matmul(1024, 1024, 1024, false, false));
  });
  benchmark::RegisterBenchmark("raw/sgemm_1024", [](benchmark::State& state) {
    measure(state, raw_matmul(1024, 1024, 1024, false, false), 2.0 * 1024 * 1024 * 1024);
  });
  benchmark::RegisterBenchmark("peak/matmul_2048", [](benchmark::State& state) {
    measure(state, raw_matmul(2048, 2048, 2048, false, false), 2.0 * 2048 * 2048 * 2048);
  });
}

}  // namespace

int main(int argc, char** argv) {
  omp_set_num_threads(1);  // one thread, whatever OMP_NUM_THREADS says
  benchmark::Initialize(&argc, argv);
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
