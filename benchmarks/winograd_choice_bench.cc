// Whether winograd_pays (kernels/onednn/winograd.h) picks the faster algorithm on this machine: for 3x3
// convolutions of stride 1 and pads 1 around its threshold, oneDNN's direct and Winograd primitives are
// timed alone (forward_training, backward_data, backward_weights; each in its preferred layouts, median of
// 15 runs after 3), on OMP_NUM_THREADS threads. Prints one row per shape: the work (4x4 output tiles times
// channel pairs), the milliseconds of each pass, direct / Winograd for the three together, and what the rule
// picks; then how many shapes the rule got right. Exit status 0 either way: it reports, it does not judge.
//
//   OMP_NUM_THREADS=1 build/release/benchmarks/winograd_choice_bench
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/onednn/winograd.h"

namespace {

using dnnl::memory;

struct Shape {
  int64_t batch, channels, side;  // channels in = channels out; a side x side plane
};

struct PassTimes {
  double forward = 0, backward_data = 0, backward_weights = 0;
  double sum() const { return forward + backward_data + backward_weights; }
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

double median_ms(dnnl::primitive p, const std::unordered_map<int, memory>& args) {
  dnnl::stream stream(engine());
  for (int i = 0; i < 3; ++i) p.execute(stream, args);
  stream.wait();
  std::vector<double> ms;
  for (int i = 0; i < 15; ++i) {
    const auto start = std::chrono::steady_clock::now();
    p.execute(stream, args);
    stream.wait();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// A memory in `desc` holding values away from 0 and denormals.
memory filled(const memory::desc& desc) {
  memory m(desc, engine());
  auto* p = static_cast<float*>(m.get_data_handle());
  for (size_t i = 0; i < desc.get_size() / sizeof(float); ++i) p[i] = 0.25f + 0.01f * static_cast<float>(i % 97);
  return m;
}

PassTimes time_passes(const Shape& s, dnnl::algorithm algorithm) {
  using tag = memory::format_tag;
  const memory::dims x{s.batch, s.channels, s.side, s.side}, w{s.channels, s.channels, 3, 3}, ones{1, 1};
  const memory::desc xd(x, memory::data_type::f32, tag::any), wd(w, memory::data_type::f32, tag::any),
      yd(x, memory::data_type::f32, tag::any);
  const dnnl::convolution_forward::primitive_desc forward(
      {dnnl::prop_kind::forward_training, algorithm, xd, wd, yd, ones, ones, ones}, engine());
  const dnnl::convolution_backward_data::primitive_desc data({algorithm, xd, wd, yd, ones, ones, ones}, engine(),
                                                             forward);
  const dnnl::convolution_backward_weights::primitive_desc weights({algorithm, xd, wd, yd, ones, ones, ones}, engine(),
                                                                   forward);
  PassTimes t;
  t.forward = median_ms(dnnl::convolution_forward(forward), {{DNNL_ARG_SRC, filled(forward.src_desc())},
                                                             {DNNL_ARG_WEIGHTS, filled(forward.weights_desc())},
                                                             {DNNL_ARG_DST, filled(forward.dst_desc())}});
  t.backward_data =
      median_ms(dnnl::convolution_backward_data(data), {{DNNL_ARG_DIFF_DST, filled(data.diff_dst_desc())},
                                                        {DNNL_ARG_WEIGHTS, filled(data.weights_desc())},
                                                        {DNNL_ARG_DIFF_SRC, filled(data.diff_src_desc())}});
  t.backward_weights = median_ms(dnnl::convolution_backward_weights(weights),
                                 {{DNNL_ARG_DIFF_DST, filled(weights.diff_dst_desc())},
                                  {DNNL_ARG_SRC, filled(weights.src_desc())},
                                  {DNNL_ARG_DIFF_WEIGHTS, filled(weights.diff_weights_desc())}});
  return t;
}

}  // namespace

int main() {
  // ResNet-18's layer1 at 32x32 (64 channels at 8x8) from a pipeline's micro-batch up to the whole batch,
  // and smaller and larger channel counts and planes around the threshold.
  const std::vector<Shape> shapes = {{4, 64, 8},  {8, 64, 8},  {16, 64, 8}, {32, 64, 8}, {8, 32, 8},
                                     {16, 32, 8}, {8, 32, 16}, {2, 64, 16}, {8, 128, 8}, {8, 256, 8}};
  std::printf("3x3 convolutions, stride 1, pads 1, %d thread(s); this CPU's threshold: work >= 2^%.0f\n",
              omp_get_max_threads(), std::log2(static_cast<double>(onnxtrain::onednn::winograd_least_work())));
  std::printf("%-18s %6s  %-24s %-24s %9s  %-8s %s\n", "N x C x H x W", "work", "direct fwd/bwd_d/bwd_w ms",
              "winograd fwd/bwd_d/bwd_w", "dir/wino", "rule", "faster");
  int right = 0;
  for (const Shape& s : shapes) {
    const int64_t tiles = s.batch * ((s.side + 3) / 4) * ((s.side + 3) / 4);
    const onnxtrain::reference::WindowGeometry window{.input = {s.side, s.side},
                                                      .output = {s.side, s.side},
                                                      .kernel = {3, 3},
                                                      .strides = {1, 1},
                                                      .dilations = {1, 1},
                                                      .pad_begin = {1, 1},
                                                      .pad_end = {1, 1}};
    const bool rule = onnxtrain::onednn::winograd_pays({s.batch, s.channels, s.side, s.side},
                                                       {s.channels, s.channels, 3, 3}, window, 1);
    const std::string name = std::to_string(s.batch) + " x " + std::to_string(s.channels) + " x " +
                             std::to_string(s.side) + " x " + std::to_string(s.side);
    const PassTimes direct = time_passes(s, dnnl::algorithm::convolution_direct);
    PassTimes winograd;
    try {
      winograd = time_passes(s, dnnl::algorithm::convolution_winograd);
    } catch (const dnnl::error&) {
      std::printf("%-18s oneDNN has no Winograd kernel on this CPU\n", name.c_str());
      continue;
    }
    const double ratio = direct.sum() / winograd.sum();
    const bool winograd_faster = ratio > 1;
    right += rule == winograd_faster;
    char direct_ms[64], winograd_ms[64];
    std::snprintf(direct_ms, sizeof direct_ms, "%.3f/%.3f/%.3f", direct.forward, direct.backward_data,
                  direct.backward_weights);
    std::snprintf(winograd_ms, sizeof winograd_ms, "%.3f/%.3f/%.3f", winograd.forward, winograd.backward_data,
                  winograd.backward_weights);
    std::printf("%-18s 2^%4.1f  %-24s %-24s %9.2f  %-8s %s\n", name.c_str(),
                std::log2(static_cast<double>(tiles * s.channels * s.channels)), direct_ms, winograd_ms, ratio,
                rule ? "winograd" : "direct", winograd_faster ? "winograd" : "direct");
  }
  std::printf("the rule picked the faster algorithm for %d of %zu shapes\n", right, shapes.size());
  return 0;
}
