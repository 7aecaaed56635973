// The single-pixel convolution's ConvGrad (single_pixel_conv.h): with dY as the (N×M) matrix it is,
//   dXv (N×K) = dY · Wv,   dWv (M×K) = dY^T · Xv,   dB (1×M) = 1 (1×N) · dY,
// each one oneDNN matmul on plain layouts, then dX and dW written with zeros where no tap reads (no
// scatter where the taps cover the tensor). dB is a product with a row of ones so that bfloat16 sums
// in float32 as the other products do.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_common.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/single_pixel_conv.h"
#include "kernels/onednn/tap_product_conv.h"  // gemm
#include "kernels/scratch_arena.h"

namespace onnxtrain::onednn {
namespace {

class SinglePixelConvGradKernel final : public Kernel, public ReportsImplementation {
 public:
  SinglePixelConvGradKernel(const KernelSpec& spec, SinglePixelConv g) : spec_(spec), g_(std::move(g)) {
    const auto wanted = [&](size_t i) { return i < spec.outputs.size() && spec.outputs[i].present(); };
    want_dx_ = wanted(0);
    want_dw_ = wanted(1);
    want_db_ = wanted(2);
    const DType dtype = spec.inputs[0].dtype;
    element_ = dtype_size(dtype);
    taps_key_ = g_.w_taps_key(element_);
    const int64_t n = g_.batch, m = g_.out_channels, k = g_.depth();
    if (want_dx_)
      input_gradient_ = MatrixProduct(matrix_desc(n, m, dtype), matrix_desc(m, k, dtype), matrix_desc(n, k, dtype));
    if (want_dw_)
      weight_gradient_ = MatrixProduct(matrix_desc(m, n, dtype, /*transposed=*/true), matrix_desc(n, k, dtype),
                                       matrix_desc(m, k, dtype));
    if (want_db_) {
      bias_gradient_ = MatrixProduct(matrix_desc(1, n, dtype), matrix_desc(n, m, dtype), matrix_desc(1, m, dtype));
      ones_.resize(static_cast<size_t>(n) * element_);
      for (int64_t i = 0; i < n; ++i) {
        if (element_ == 4) {
          const float one = 1.0f;
          std::memcpy(&ones_[i * 4], &one, 4);
        } else {
          const uint16_t one = 0x3F80;  // bfloat16 1.0
          std::memcpy(&ones_[i * 2], &one, 2);
        }
      }
    }
    for (const MatrixProduct* p : {&input_gradient_, &weight_gradient_, &bias_gradient_}) {
      if (p->implementation().empty()) continue;
      implementation_ += (implementation_.empty() ? "matmul " : ", ") + p->implementation();
    }
  }

  std::string library_implementation() const override { return implementation_; }
  // dW (float32): summed over runs as the taps' dWv, written into dW once the sum ends.
  bool sums_output(size_t index) const override { return index == 1 && element_ == 4; }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    checked(spec_, "run", [&] {
      ScratchArena::Lease lease;
      const auto bytes = [&](int64_t rows) { return static_cast<size_t>(rows * g_.depth()) * element_; };
      const void* dy = inputs[0].data;
      if (want_dx_) {
        void* dxv = g_.x_whole() ? outputs[0].data : lease.take(bytes(g_.batch));
        // The forward convolution of this run gathered the same taps of the same W (Stream::derived).
        input_gradient_.run(dy, g_.w_matrix_from_forward(inputs[2].data, stream, taps_key_, lease, element_), dxv);
        if (!g_.x_whole()) g_.scatter_x(dxv, outputs[0].data, element_);
      }
      if (Stream::OutputSum* sum = want_dw_ ? stream.output_sum(outputs[1].data) : nullptr) {
        sum_weight_gradient(*sum, dy, g_.x_matrix(inputs[1].data, lease, element_));
      } else if (want_dw_) {
        void* dwv = g_.w_whole() ? outputs[1].data : lease.take(bytes(g_.out_channels));
        weight_gradient_.run(dy, g_.x_matrix(inputs[1].data, lease, element_), dwv);
        if (!g_.w_whole()) g_.scatter_w(dwv, outputs[1].data, element_);
      }
      if (want_db_) bias_gradient_.run(ones_.data(), dy, outputs[2].data);
    });
  }

 private:
  // dWv (M×K) = dY^T · Xv summed over the runs of a sum as the sum's kept taps (sgemm with beta 1 after
  // the first), which the session writes into dW (M, C, k...) once (TapLayout: rows M·C, the taps' offsets).
  void sum_weight_gradient(Stream::OutputSum& sum, const void* dy, const void* xv) const {
    const int64_t n = g_.batch, m = g_.out_channels, k = g_.depth();
    const bool begins = !sum.kept;
    if (begins) {
      sum.partial.resize(static_cast<size_t>(m * k));
      sum.layout = {.rows = m * g_.in_channels, .plane = g_.kernel_plane, .offsets = g_.w_offsets};
      sum.kept = true;
    }
    gemm(true, false, m, k, n, static_cast<const float*>(dy), m, static_cast<const float*>(xv), k, begins ? 0.0f : 1.0f,
         sum.partial.data(), k);
  }

  KernelSpec spec_;
  SinglePixelConv g_;
  size_t element_ = 4;
  std::string taps_key_;  // where the forward of this run keeps W's gathered taps (Stream::derived)
  bool want_dx_ = false, want_dw_ = false, want_db_ = false;
  MatrixProduct input_gradient_, weight_gradient_, bias_gradient_;
  std::vector<std::byte> ones_;  // N ones of the dtype: the bias gradient's left operand
  std::string implementation_;
};

// The depthwise case, per channel c over the batch: dX[n][c][tap] = dY[n][c]·W[c][tap] (zero at the
// positions no tap reads), dW[c][tap] = sum over n of dY[n][c]·X[n][c][tap] (zero at the taps in the
// padding), dB[c] = sum over n of dY[n][c]; the channels split over the threads.
class DepthwiseSinglePixelConvGradKernel final : public Kernel, public ReportsImplementation {
 public:
  DepthwiseSinglePixelConvGradKernel(const KernelSpec& spec, SinglePixelConv g) : g_(std::move(g)) {
    for (size_t i = 0; i < 3; ++i) wanted_[i] = i < spec.outputs.size() && spec.outputs[i].present();
  }

  std::string library_implementation() const override { return "depthwise loops (no oneDNN primitive)"; }
  // dW: after the first run of a sum, added at the taps.
  bool sums_output(size_t index) const override { return index == 1; }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const float* dy = inputs[0].as<const float>();
    const float* x = inputs[1].as<const float>();
    const float* w = inputs[2].as<const float>();
    float* dx = wanted_[0] ? outputs[0].as<float>() : nullptr;
    float* dw = wanted_[1] ? outputs[1].as<float>() : nullptr;
    float* db = wanted_[2] ? outputs[2].as<float>() : nullptr;
    const Stream::OutputSum* dw_sum = dw ? stream.output_sum(dw) : nullptr;
    const bool add_dw = dw_sum && !dw_sum->first;
    const int64_t batch = g_.batch, channels = g_.in_channels, taps = g_.taps();
    const int64_t in_plane = g_.in_plane, kernel_plane = g_.kernel_plane;
    cpu::parallel_for(channels, 4096 / (batch * (taps + 1)) + 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        const float* wc = w + c * kernel_plane;
        if (dw) {
          float* dwc = dw + c * kernel_plane;
          if (!add_dw) std::fill(dwc, dwc + kernel_plane, 0.0f);
          for (int64_t t = 0; t < taps; ++t) {
            float sum = 0;
            for (int64_t n = 0; n < batch; ++n)
              sum += dy[n * channels + c] * x[(n * channels + c) * in_plane + g_.x_offsets[t]];
            dwc[g_.w_offsets[t]] += sum;  // zero-filled above unless the sum adds
          }
        }
        if (db) {
          float sum = 0;
          for (int64_t n = 0; n < batch; ++n) sum += dy[n * channels + c];
          db[c] = sum;
        }
        if (dx) {
          for (int64_t n = 0; n < batch; ++n) {
            float* dxr = dx + (n * channels + c) * in_plane;
            std::fill(dxr, dxr + in_plane, 0.0f);
            for (int64_t t = 0; t < taps; ++t) dxr[g_.x_offsets[t]] = dy[n * channels + c] * wc[g_.w_offsets[t]];
          }
        }
      }
    });
  }

 private:
  SinglePixelConv g_;
  bool wanted_[3] = {false, false, false};
};

}  // namespace

std::unique_ptr<Kernel> make_single_pixel_conv_grad(const KernelSpec& spec, const reference::WindowGeometry& window) {
  // ConvGrad(dY, X, W) -> (dX, dW, dB)
  std::optional<SinglePixelConv> g = SinglePixelConv::for_spec(spec, 1, window);
  if (!g) return nullptr;
  if (g->depthwise) return std::make_unique<DepthwiseSinglePixelConvGradKernel>(spec, std::move(*g));
  return std::make_unique<SinglePixelConvGradKernel>(spec, std::move(*g));
}

}  // namespace onnxtrain::onednn
