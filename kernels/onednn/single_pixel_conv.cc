// The single-pixel convolution's geometry, gathers and scatters, its matrix products, and its Conv
// kernel: Y (N×M) = Xv (N×K) · Wv^T (+ B), where Y's plain layout is (N, M, 1...) already. float32, and
// bfloat16 where the CPU has it natively (as the other oneDNN Conv kernels).
#include "kernels/onednn/single_pixel_conv.h"

#include <cstring>

#include "kernels/cpu/cpu_common.h"
#include "kernels/onednn/conv_operands.h"
#include "kernels/onednn/onednn_common.h"

namespace onnxtrain::onednn {

namespace {

// Copies row r's taps: to[r·taps + t] = from[r·plane + offsets[t]] (gather) for rows [0, rows), split
// over the threads; T is the element type's stand-in of the same size.
template <typename T>
void gather(const T* from, T* to, int64_t rows, int64_t plane, const std::vector<int64_t>& offsets) {
  const auto taps = static_cast<int64_t>(offsets.size());
  cpu::parallel_for(rows, 4096 / plane + 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t t = 0; t < taps; ++t) to[r * taps + t] = from[r * plane + offsets[t]];
  });
}

template <typename Fn>
void by_element(size_t element, Fn&& fn) {
  if (element == 4)
    fn(float{});
  else
    fn(uint16_t{});  // bfloat16
}

}  // namespace

bool SinglePixelConv::x_whole() const {
  if (taps() != in_plane) return false;
  for (int64_t t = 0; t < taps(); ++t)
    if (x_offsets[t] != t) return false;
  return true;
}

std::optional<SinglePixelConv> SinglePixelConv::of(const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                                                   const reference::WindowGeometry& window, int64_t group) {
  if (x.size() < 3 || w.size() != x.size()) return std::nullopt;
  const bool depthwise = group > 1 && group == x[1] && w[0] == group && w[1] == 1;
  if (group != 1 && !depthwise) return std::nullopt;
  for (int64_t out : window.output)
    if (out != 1) return std::nullopt;
  SinglePixelConv g;
  g.depthwise = depthwise;
  g.batch = x[0];
  g.in_channels = x[1];
  g.out_channels = w[0];
  // Per axis, the kernel positions inside the input and where they fall on it (output position 0).
  std::vector<int64_t> x_offsets{0}, w_offsets{0};
  for (size_t a = 0; a < window.spatial(); ++a) {
    const int64_t in = window.input[a], k = window.kernel[a];
    std::vector<int64_t> next_x, next_w;
    for (size_t i = 0; i < x_offsets.size(); ++i)
      for (int64_t kp = 0; kp < k; ++kp) {
        const int64_t at = window.input_position(a, 0, kp);
        if (at < 0 || at >= in) continue;
        next_x.push_back(x_offsets[i] * in + at);
        next_w.push_back(w_offsets[i] * k + kp);
      }
    x_offsets = std::move(next_x);
    w_offsets = std::move(next_w);
    g.in_plane *= in;
    g.kernel_plane *= k;
  }
  if (x_offsets.empty()) return std::nullopt;  // every tap in the padding: Y is the bias
  g.x_offsets = std::move(x_offsets);
  g.w_offsets = std::move(w_offsets);
  return g;
}

std::optional<SinglePixelConv> SinglePixelConv::for_spec(const KernelSpec& spec, size_t x_input,
                                                         const reference::WindowGeometry& window) {
  std::optional<SinglePixelConv> g =
      of(spec.inputs[x_input].sizes, spec.inputs[x_input + 1].sizes, window, spec.attributes.get_int("group", 1));
  if (g && g->depthwise && spec.inputs[x_input].dtype != DType::Float32) return std::nullopt;
  return g;
}

const void* SinglePixelConv::x_matrix(const void* x, ScratchArena::Lease& lease, size_t element) const {
  if (x_whole()) return x;
  void* xv = lease.take(static_cast<size_t>(batch * depth()) * element);
  by_element(element, [&]<typename T>(T) {
    gather(static_cast<const T*>(x), static_cast<T*>(xv), batch * in_channels, in_plane, x_offsets);
  });
  return xv;
}
const void* SinglePixelConv::w_matrix(const void* w, ScratchArena::Lease& lease, size_t element) const {
  if (w_whole()) return w;
  void* wv = lease.take(static_cast<size_t>(out_channels * depth()) * element);
  by_element(element, [&]<typename T>(T) {
    gather(static_cast<const T*>(w), static_cast<T*>(wv), out_channels * in_channels, kernel_plane, w_offsets);
  });
  return wv;
}
std::string SinglePixelConv::w_taps_key(size_t element) const {
  std::string key = "single-pixel W taps " + std::to_string(out_channels) + "x" + std::to_string(in_channels) + "x" +
                    std::to_string(kernel_plane) + " of " + std::to_string(element) + " bytes at";
  for (int64_t offset : w_offsets) key += " " + std::to_string(offset);
  return key;
}
const void* SinglePixelConv::w_matrix_kept(const void* w, Stream& stream, const std::string& key,
                                           std::shared_ptr<std::vector<std::byte>>& kept, ScratchArena::Lease& lease,
                                           size_t element) const {
  if (w_whole() || !stream.keeps_derived_values()) return w_matrix(w, lease, element);
  return stream.derive(w, key, static_cast<size_t>(out_channels * depth()) * element, kept, [&](std::byte* wv) {
    by_element(element, [&]<typename T>(T) {
      gather(static_cast<const T*>(w), reinterpret_cast<T*>(wv), out_channels * in_channels, kernel_plane, w_offsets);
    });
  });
}
const void* SinglePixelConv::w_matrix_from_forward(const void* w, const Stream& stream, const std::string& key,
                                                   ScratchArena::Lease& lease, size_t element) const {
  if (!w_whole())
    if (const Stream::Derived kept = stream.derived(w, key)) return kept->data();
  return w_matrix(w, lease, element);
}
void SinglePixelConv::scatter_x(const void* dxv, void* dx, size_t element) const {
  by_element(element, [&]<typename T>(T) {
    scatter_taps(static_cast<const T*>(dxv), static_cast<T*>(dx), batch * in_channels, in_plane, x_offsets);
  });
}
void SinglePixelConv::scatter_w(const void* dwv, void* dw, size_t element) const {
  by_element(element, [&]<typename T>(T) {
    scatter_taps(static_cast<const T*>(dwv), static_cast<T*>(dw), out_channels * in_channels, kernel_plane, w_offsets);
  });
}

dnnl::memory::desc matrix_desc(int64_t rows, int64_t cols, DType dtype, bool transposed) {
  const dnnl::memory::dims strides = transposed ? dnnl::memory::dims{1, rows} : dnnl::memory::dims{cols, 1};
  return dnnl::memory::desc({rows, cols}, data_type_of(dtype), strides);
}

MatrixProduct::MatrixProduct(const dnnl::memory::desc& a, const dnnl::memory::desc& b, const dnnl::memory::desc& c,
                             const dnnl::memory::desc& bias) {
  dnnl::engine& engine = cpu_engine();
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, bias, c), user_scratchpad(), engine);
  matmul_ = dnnl::matmul(pd);
  implementation_ = pd.impl_info_str();
  a_ = dnnl::memory(a, engine, nullptr);
  b_ = dnnl::memory(b, engine, nullptr);
  c_ = dnnl::memory(c, engine, nullptr);
  scratchpad_ = dnnl::memory(pd.scratchpad_desc(), engine, nullptr);
  args_ = {{DNNL_ARG_SRC, a_.get()},
           {DNNL_ARG_WEIGHTS, b_.get()},
           {DNNL_ARG_DST, c_.get()},
           {DNNL_ARG_SCRATCHPAD, scratchpad_.get()}};
  if (!bias.is_zero()) {
    bias_ = dnnl::memory(bias, engine, nullptr);
    args_.push_back({DNNL_ARG_BIAS, bias_.get()});
  }
}

void MatrixProduct::run(const void* a, const void* b, void* c, const void* bias) {
  ScratchArena::Lease lease;
  scratchpad_.set_data_handle(lease.take(scratchpad_.get_desc().get_size()));
  a_.set_data_handle(const_cast<void*>(a));
  b_.set_data_handle(const_cast<void*>(b));
  c_.set_data_handle(c);
  if (bias_) bias_.set_data_handle(const_cast<void*>(bias));
  dnnl::stream& stream = cpu_stream();
  execute(matmul_, stream, args_);
  stream.wait();
}

namespace {

class SinglePixelConvKernel final : public Kernel, public ReportsImplementation {
 public:
  SinglePixelConvKernel(const KernelSpec& spec, SinglePixelConv g) : spec_(spec), g_(std::move(g)) {
    const DType dtype = spec.inputs[0].dtype;
    element_ = dtype_size(dtype);
    taps_key_ = g_.w_taps_key(element_);
    has_bias_ = spec.inputs.size() > 2 && spec.inputs[2].present();
    const int64_t n = g_.batch, m = g_.out_channels, k = g_.depth();
    product_ = MatrixProduct(matrix_desc(n, k, dtype), matrix_desc(k, m, dtype, /*transposed=*/true),
                             matrix_desc(n, m, dtype), has_bias_ ? matrix_desc(1, m, dtype) : dnnl::memory::desc());
  }

  std::string library_implementation() const override { return "matmul " + product_.implementation(); }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    checked(spec_, "run", [&] {
      ScratchArena::Lease lease;
      product_.run(g_.x_matrix(inputs[0].data, lease, element_),
                   g_.w_matrix_kept(inputs[1].data, stream, taps_key_, kept_taps_, lease, element_), outputs[0].data,
                   has_bias_ ? inputs[2].data : nullptr);
    });
  }

 private:
  KernelSpec spec_;
  SinglePixelConv g_;
  size_t element_ = 4;
  bool has_bias_ = false;
  MatrixProduct product_;
  // The gathered weight taps this run keeps for its backward (Stream::derived), under taps_key_; reused by
  // the next run once the stream that held them is gone.
  std::string taps_key_;
  std::shared_ptr<std::vector<std::byte>> kept_taps_;
};

// The depthwise case: Y[n][c] = B[c] + sum over taps of W[c][tap]·X[n][c][tap], the (n, c) rows split over
// the threads.
class DepthwiseSinglePixelConvKernel final : public Kernel, public ReportsImplementation {
 public:
  DepthwiseSinglePixelConvKernel(const KernelSpec& spec, SinglePixelConv g) : g_(std::move(g)) {
    has_bias_ = spec.inputs.size() > 2 && spec.inputs[2].present();
  }

  std::string library_implementation() const override { return "depthwise loops (no oneDNN primitive)"; }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const float* x = inputs[0].as<const float>();
    const float* w = inputs[1].as<const float>();
    const float* b = has_bias_ ? inputs[2].as<const float>() : nullptr;
    float* y = outputs[0].as<float>();
    const int64_t channels = g_.in_channels, taps = g_.taps();
    cpu::parallel_for(g_.batch * channels, 1024 / (taps + 1) + 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t c = row % channels;
        const float* xr = x + row * g_.in_plane;
        const float* wr = w + c * g_.kernel_plane;
        float sum = b ? b[c] : 0.0f;
        for (int64_t t = 0; t < taps; ++t) sum += wr[g_.w_offsets[t]] * xr[g_.x_offsets[t]];
        y[row] = sum;
      }
    });
  }

 private:
  SinglePixelConv g_;
  bool has_bias_ = false;
};

}  // namespace

std::unique_ptr<Kernel> make_single_pixel_conv(const KernelSpec& spec, const reference::WindowGeometry& window) {
  std::optional<SinglePixelConv> g = SinglePixelConv::for_spec(spec, 0, window);
  if (!g) return nullptr;
  if (g->depthwise) return std::make_unique<DepthwiseSinglePixelConvKernel>(spec, std::move(*g));
  return std::make_unique<SinglePixelConvKernel>(spec, std::move(*g));
}

}  // namespace onnxtrain::onednn
