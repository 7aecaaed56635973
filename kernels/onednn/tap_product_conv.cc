// The tap-product convolution's geometry, transposes and products, and its Conv kernel (tap_product_conv.h).
#include "kernels/onednn/tap_product_conv.h"

#include <algorithm>

#include "kernels/cpu/cpu_common.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/reference_fallback.h"
#include "kernels/scratch_arena.h"

namespace onnxtrain::onednn {

std::optional<TapProductConv> TapProductConv::of(const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                                                 const reference::WindowGeometry& window, int64_t group) {
  if (group != 1 || x.size() < 3 || w.size() != x.size()) return std::nullopt;
  TapProductConv g;
  g.batch = x[0];
  g.in_channels = x[1];
  g.out_channels = w[0];
  for (size_t a = 0; a < window.spatial(); ++a) {
    g.in_plane *= window.input[a];
    g.out_plane *= window.output[a];
    g.kernel_plane *= window.kernel[a];
  }
  // A 1x1 kernel reads no padding, and oneDNN's 1x1 convolution runs it without reorders.
  std::vector<ConvAxis> axes;
  for (size_t a = 0; a < window.spatial(); ++a) {
    axes.push_back({.input = window.input[a],
                    .output = window.output[a],
                    .kernel = window.kernel[a],
                    .stride = window.strides[a],
                    .pad_begin = window.pad_begin[a],
                    .dilation = window.dilations[a]});
  }
  if (!tap_product_takes(axes)) return std::nullopt;
  for (int64_t tap = 0; tap < g.kernel_plane; ++tap) {
    Run run{.tap = tap};
    for (int64_t out = 0; out < g.out_plane; ++out) {
      // The input position of (out, tap), axis by axis from the last (row-major indices).
      int64_t in = 0, in_stride = 1, out_rest = out, tap_rest = tap;
      bool inside = true;
      for (size_t a = window.spatial(); a-- > 0;) {
        const int64_t at = window.input_position(a, out_rest % window.output[a], tap_rest % window.kernel[a]);
        inside = inside && at >= 0 && at < window.input[a];
        in += at * in_stride;
        in_stride *= window.input[a];
        out_rest /= window.output[a];
        tap_rest /= window.kernel[a];
      }
      if (!inside) continue;
      if (run.length > 0 && out == run.out_begin + run.length && in == run.in_begin + run.length) {
        ++run.length;
        continue;
      }
      if (run.length > 0) g.runs.push_back(run);
      run = Run{.tap = tap, .out_begin = out, .in_begin = in, .length = 1};
    }
    if (run.length > 0) g.runs.push_back(run);
  }
  if (g.runs.empty()) return std::nullopt;  // every tap in the padding: Y is the bias
  g.key = "tap-major W " + std::to_string(g.out_channels) + "x" + std::to_string(g.in_channels) + "x" +
          std::to_string(g.kernel_plane);
  return g;
}

std::optional<TapProductConv> TapProductConv::for_spec(const KernelSpec& spec, size_t x_input,
                                                       const reference::WindowGeometry& window, bool tap_major) {
  if (spec.inputs[x_input].dtype != DType::Float32) return std::nullopt;
  const std::vector<int64_t>& given = spec.inputs[x_input + 1].sizes;
  const std::vector<int64_t> w = tap_major ? model_layout_sizes(given) : given;  // Wt (k..., C, M) -> W (M, C, k...)
  return of(spec.inputs[x_input].sizes, w, window, spec.attributes.get_int("group", 1));
}

reference::WindowGeometry TapProductConv::tap_major_window(const KernelSpec& spec, size_t x_input) {
  const std::vector<int64_t>& x = spec.inputs[x_input].sizes;
  const std::vector<int64_t>& y = x_input == 0 ? spec.outputs[0].sizes : spec.inputs[0].sizes;
  const std::vector<int64_t>& wt = spec.inputs[x_input + 1].sizes;
  return reference::read_window_geometry(spec, {x.begin() + 2, x.end()}, {y.begin() + 2, y.end()},
                                         {wt.begin(), wt.end() - 2});
}

void TapProductConv::to_positions(const float* from, float* to, int64_t n, int64_t k, int64_t p) {
  const int64_t rows = n * k;
  cpu::parallel_for(rows, 8192 / p + 1, [&](int64_t begin, int64_t end) {
    for (int64_t q = 0; q < p; ++q)
      for (int64_t r = begin; r < end; ++r) to[q * rows + r] = from[r * p + q];
  });
}

void TapProductConv::to_plane(const float* from, float* to, int64_t n, int64_t k, int64_t p, const float* bias) {
  const int64_t rows = n * k;
  cpu::parallel_for(rows, 8192 / p + 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float b = bias ? bias[r % k] : 0.0f;
      for (int64_t q = 0; q < p; ++q) to[r * p + q] = from[q * rows + r] + b;
    }
  });
}

namespace {

// W (M, C, T) and W' (T, C, M) as oneDNN memory descriptors of the same (M, C, T) tensor.
dnnl::memory::desc weight_desc(int64_t m, int64_t c, int64_t t, bool tap_major) {
  const dnnl::memory::dims strides = tap_major ? dnnl::memory::dims{1, m, c * m} : dnnl::memory::dims{c * t, t, 1};
  return dnnl::memory::desc({m, c, t}, dnnl::memory::data_type::f32, strides);
}

}  // namespace

TapProductConv::WeightTranspose::WeightTranspose(const TapProductConv& g, bool to_tap_major, bool adds) {
  const dnnl::memory::desc plain = weight_desc(g.out_channels, g.in_channels, g.kernel_plane, false);
  const dnnl::memory::desc tap_major = weight_desc(g.out_channels, g.in_channels, g.kernel_plane, true);
  const dnnl::memory::desc& from = to_tap_major ? plain : tap_major;
  const dnnl::memory::desc& to = to_tap_major ? tap_major : plain;
  dnnl::primitive_attr attr;
  if (adds) {  // the reorder's sum post-op: to = transposed from + to
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    attr.set_post_ops(sum);
  }
  reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to, attr));
  from_ = dnnl::memory(from, cpu_engine(), nullptr);
  to_ = dnnl::memory(to, cpu_engine(), nullptr);
}

void TapProductConv::WeightTranspose::run(const float* from, float* to) {
  from_.set_data_handle(const_cast<float*>(from));
  to_.set_data_handle(to);
  dnnl::stream& stream = cpu_stream();
  reorder_.execute(stream, from_, to_);
  stream.wait();
}

const float* TapProductConv::tap_major_kept(const float* w, WeightTranspose& transpose, Stream& stream,
                                            std::shared_ptr<std::vector<std::byte>>& kept,
                                            ScratchArena::Lease& lease) const {
  if (!stream.keeps_derived_values()) return tap_major_from_forward(w, transpose, stream, lease);  // transposes
  const size_t bytes = static_cast<size_t>(weight_elements()) * sizeof(float);
  return reinterpret_cast<const float*>(
      stream.derive(w, key, bytes, kept, [&](std::byte* wt) { transpose.run(w, reinterpret_cast<float*>(wt)); }));
}

const float* TapProductConv::tap_major_from_forward(const float* w, WeightTranspose& transpose, const Stream& stream,
                                                    ScratchArena::Lease& lease) const {
  if (const Stream::Derived kept = stream.derived(w, key)) return reinterpret_cast<const float*>(kept->data());
  float* wt = lease.take<float>(static_cast<size_t>(weight_elements()));
  transpose.run(w, wt);
  return wt;
}

void gemm(bool a_transposed, bool b_transposed, int64_t rows, int64_t cols, int64_t depth, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const dnnl_status_t status = dnnl_sgemm(a_transposed ? 'T' : 'N', b_transposed ? 'T' : 'N', rows, cols, depth, 1.0f,
                                          a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success) throw dnnl::error(status, "dnnl_sgemm");
}

namespace {

class TapProductConvKernel final : public Kernel, public ReportsImplementation {
 public:
  // `tap_major`: input 1 is Wt already (TapMajorConv).
  TapProductConvKernel(const KernelSpec& spec, TapProductConv g, bool tap_major = false)
      : spec_(spec), g_(std::move(g)) {
    has_bias_ = spec.inputs.size() > 2 && spec.inputs[2].present();
    if (!tap_major) to_tap_major_.emplace(g_, /*to_tap_major=*/true);
  }

  std::string library_implementation() const override {
    return "tap products (" + std::to_string(g_.runs.size()) + " sgemm)";
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    checked(spec_, "run", [&] {
      const int64_t n = g_.batch, c = g_.in_channels, m = g_.out_channels;
      ScratchArena::Lease lease;
      auto* xt = lease.take<float>(static_cast<size_t>(g_.in_plane * n * c));
      auto* yt = lease.take<float>(static_cast<size_t>(g_.out_plane * n * m));
      TapProductConv::to_positions(inputs[0].as<const float>(), xt, n, c, g_.in_plane);
      const float* wt = to_tap_major_
                            ? g_.tap_major_kept(inputs[1].as<const float>(), *to_tap_major_, stream, kept_, lease)
                            : inputs[1].as<const float>();
      std::fill(yt, yt + g_.out_plane * n * m, 0.0f);
      for (const TapProductConv::Run& r : g_.runs)
        gemm(false, false, r.length * n, m, c, xt + r.in_begin * n * c, c, wt + r.tap * c * m, m, 1.0f,
             yt + r.out_begin * n * m, m);
      TapProductConv::to_plane(yt, outputs[0].as<float>(), n, m, g_.out_plane,
                               has_bias_ ? inputs[2].as<const float>() : nullptr);
    });
  }

 private:
  KernelSpec spec_;
  TapProductConv g_;
  bool has_bias_ = false;
  std::optional<TapProductConv::WeightTranspose> to_tap_major_;  // none when the graph holds Wt
  // W' this run keeps for its backward (Stream::derived); reused by the next run once the stream that
  // held it is gone.
  std::shared_ptr<std::vector<std::byte>> kept_;
};

}  // namespace

std::unique_ptr<Kernel> make_tap_product_conv(const KernelSpec& spec, const reference::WindowGeometry& window) {
  std::optional<TapProductConv> g = TapProductConv::for_spec(spec, 0, window);
  if (!g) return nullptr;
  return std::make_unique<TapProductConvKernel>(spec, std::move(*g));
}

std::unique_ptr<Kernel> make_tap_major_conv(const KernelSpec& spec) {
  std::optional<TapProductConv> g = TapProductConv::for_spec(spec, 0, TapProductConv::tap_major_window(spec, 0), true);
  if (!g) return reference_kernel(spec);
  return std::make_unique<TapProductConvKernel>(spec, std::move(*g), /*tap_major=*/true);
}

}  // namespace onnxtrain::onednn
