// The losses' backward ops (ai.onnxtrain), float32, as the reference kernel (kernels/reference/
// losses_grad.cc) defines them, scores as (N, C, D1·…·Dk):
//   SoftmaxCrossEntropyLossGrad(dLoss, log_prob, labels, [weights]): dscores = k·w[l]·(exp(log_prob) - onehot(l));
//   NegativeLogLikelihoodLossGrad(dLoss, target, input_shape, [weights]): dinput = -k·w[l]·onehot(l);
// k = dLoss[e] (none), dLoss (sum) or dLoss / Σ w (mean); 0 for elements labelled ignore_index. A first
// parallel pass over the labels checks their range and sums the weights (per-chunk partials, in double);
// the second writes each element's C outputs: tiles of whole rows for (N,C), blocks of positions
// vectorised across the positions for (N,C,D).
// One kernel object must not run on two threads at once (the per-chunk partials are its own).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/losses_norm_common.h"
#include "kernels/reference/loss_common.h"
#include "kernels/reference/nn_common.h"

namespace onnxtrain {
namespace {

using reference::LossGeometry;
using reference::Reduction;

constexpr int64_t kGradBlock = 256;  // positions of (N,C,D) outputs handled together
constexpr int64_t kGradTile = 4096;  // outputs per tile of (N,C) rows (at least one row)

struct GradPartial {
  double weight = 0;
  int64_t bad = -1;  // element index of the first label out of range
};

// out[r·classes + c] = scale[r]·exp(log_prob[r·classes + c]) for a tile of `rows` rows: the exponentials
// of the whole tile in one vectorised loop (whatever the row length), then each row scaled (zeroed when
// its scale is 0: an ignored element).
ONNXTRAIN_CPU_CLONES void scaled_exp_rows(const float* log_prob, int64_t rows, int64_t classes, const float* scale,
                                          float* out) {
  const int64_t n = rows * classes;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = cpu::exp_simd(log_prob[i]);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = out + r * classes;
    const float s = scale[r];
    if (s == 0.0f) {
      for (int64_t c = 0; c < classes; ++c) row[c] = 0.0f;
      continue;
    }
#pragma omp simd
    for (int64_t c = 0; c < classes; ++c) row[c] *= s;
  }
}

// out[c·stride + j] = scale[j]·exp(log_prob[c·stride + j]) for `width` positions of every class.
ONNXTRAIN_CPU_CLONES void scaled_exp_columns(const float* log_prob, int64_t classes, int64_t stride, int64_t width,
                                             const float* scale, float* out) {
  for (int64_t c = 0; c < classes; ++c) {
    const float* in = log_prob + c * stride;
    float* o = out + c * stride;
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) o[j] = scale[j] * cpu::exp_simd(in[j]);
  }
}

template <typename Label>
class LossGradKernel final : public Kernel {
 public:
  LossGradKernel(const LossGeometry& g, size_t labels, size_t weights)
      : g_(g), labels_(labels), weights_(weights), partials_(static_cast<size_t>(cpu::max_chunks())) {}

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const float* dloss = inputs[0].as<const float>();
    const float* log_prob = g_.softmax ? inputs[1].as<const float>() : nullptr;
    const Label* labels = inputs[labels_].as<const Label>();
    const float* weights = reference::has_view(inputs, weights_) ? inputs[weights_].as<const float>() : nullptr;
    float* out = outputs[0].as<float>();
    if (partials_.size() < static_cast<size_t>(cpu::max_chunks())) partials_.resize(cpu::max_chunks());
    const bool has_ignore = g_.ignore_index.has_value();
    const int64_t ignore = g_.ignore_index.value_or(0);
    const int64_t classes = g_.classes, inner = g_.inner, elements = g_.batch * g_.inner;
    auto ignored = [&](int64_t label) { return has_ignore && label == ignore; };

    // Pass 1: labels in range, Σ w over the elements not ignored.
    const int chunks = cpu::parallel_chunks(elements, 8192, [&](int chunk, int64_t begin, int64_t end) {
      GradPartial p;
      for (int64_t e = begin; e < end; ++e) {
        const int64_t label = static_cast<int64_t>(labels[e]);
        if (ignored(label)) continue;
        if (label < 0 || label >= classes) {
          p.bad = e;
          break;
        }
        p.weight += weights ? static_cast<double>(weights[label]) : 1.0;
      }
      partials_[chunk] = p;
    });
    double total_weight = 0;
    for (int c = 0; c < chunks; ++c) {
      if (partials_[c].bad >= 0) {
        reference::require_label_in_range(g_,
                                          g_.softmax ? "SoftmaxCrossEntropyLossGrad" : "NegativeLogLikelihoodLossGrad",
                                          static_cast<int64_t>(labels[partials_[c].bad]), partials_[c].bad);
      }
      total_weight += partials_[c].weight;
    }
    const double k = g_.reduction == Reduction::None  ? 0.0
                     : g_.reduction == Reduction::Sum ? static_cast<double>(dloss[0])
                                                      : static_cast<double>(dloss[0]) / total_weight;
    // k·w[label] of element e, 0 when it is ignored.
    auto scale_of = [&](int64_t e, int64_t label) {
      if (ignored(label)) return 0.0f;
      const double ke = g_.reduction == Reduction::None ? static_cast<double>(dloss[e]) : k;
      return static_cast<float>(ke * (weights ? static_cast<double>(weights[label]) : 1.0));
    };

    // Pass 2: the outputs.
    if (inner == 1) {
      const int64_t grain = std::max<int64_t>(1, 16384 / classes);
      cpu::parallel_chunks(g_.batch, grain, [&](int, int64_t begin, int64_t end) {
        const int64_t tile_rows = std::max<int64_t>(1, kGradTile / classes);
        float scale[kGradTile];
        for (int64_t e0 = begin; e0 < end; e0 += tile_rows) {
          const int64_t rows = std::min(tile_rows, end - e0);
          for (int64_t r = 0; r < rows; ++r) scale[r] = scale_of(e0 + r, static_cast<int64_t>(labels[e0 + r]));
          float* tile = out + e0 * classes;
          if (g_.softmax) {
            scaled_exp_rows(log_prob + e0 * classes, rows, classes, scale, tile);
          } else {
            std::fill_n(tile, rows * classes, 0.0f);
          }
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t label = static_cast<int64_t>(labels[e0 + r]);
            if (!ignored(label)) tile[r * classes + label] -= scale[r];
          }
        }
      });
      return;
    }
    const int64_t blocks_per_n = (inner + kGradBlock - 1) / kGradBlock;
    const int64_t grain = std::max<int64_t>(1, 64 / std::max<int64_t>(classes, 1));
    cpu::parallel_chunks(g_.batch * blocks_per_n, grain, [&](int, int64_t begin, int64_t end) {
      float scale[kGradBlock];
      for (int64_t t = begin; t < end; ++t) {
        const int64_t n = t / blocks_per_n, d0 = (t % blocks_per_n) * kGradBlock;
        const int64_t width = std::min(kGradBlock, inner - d0);
        const int64_t base = n * classes * inner + d0;
        for (int64_t j = 0; j < width; ++j) {
          const int64_t e = n * inner + d0 + j;
          scale[j] = scale_of(e, static_cast<int64_t>(labels[e]));
        }
        if (g_.softmax) {
          scaled_exp_columns(log_prob + base, classes, inner, width, scale, out + base);
        } else {
          for (int64_t c = 0; c < classes; ++c) std::fill_n(out + base + c * inner, width, 0.0f);
        }
        for (int64_t j = 0; j < width; ++j) {
          const int64_t label = static_cast<int64_t>(labels[n * inner + d0 + j]);
          if (!ignored(label)) out[base + label * inner + j] -= scale[j];
        }
      }
    });
  }

 private:
  LossGeometry g_;
  size_t labels_, weights_;  // input slots
  std::vector<GradPartial> partials_;
};

std::unique_ptr<Kernel> make_loss_grad(const KernelSpec& spec) {
  std::unique_ptr<Kernel> reference = cpu::reference_kernel(spec);  // checks the spec as the reference does
  const bool softmax = spec.op_type == "SoftmaxCrossEntropyLossGrad";
  const size_t labels = softmax ? 2 : 1, weights = 3;
  const TensorDesc& out = spec.outputs[0];
  if (spec.inputs[0].dtype != DType::Float32 || out.numel() == 0) return reference;
  LossGeometry g = reference::read_loss_geometry(spec, out.sizes, spec.inputs[labels], weights);
  g.softmax = softmax;
  if (spec.inputs[labels].dtype == DType::Int32) return std::make_unique<LossGradKernel<int32_t>>(g, labels, weights);
  return std::make_unique<LossGradKernel<int64_t>>(g, labels, weights);
}

}  // namespace

void register_cpu_loss_grad_kernels(KernelRegistry& registry) {
  registry.add(cpu::cpu_training_entry("SoftmaxCrossEntropyLossGrad", {DType::Float32}, &make_loss_grad));
  registry.add(cpu::cpu_training_entry("NegativeLogLikelihoodLossGrad", {DType::Float32}, &make_loss_grad));
}

}  // namespace onnxtrain
