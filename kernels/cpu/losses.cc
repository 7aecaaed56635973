// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss, float32 scores (N,C) or (N,C,D1..Dk) with
// int32/int64 labels, as the reference kernel (kernels/reference/losses.cc) defines them. One pass per
// element reads its C scores: max, Σ exp(s - max) and the label's score (log_prob written on the way when
// asked), so log_prob = s - (max + log Σ), loss = -w[label]·log_prob[label]. (N,C) scores are contiguous
// rows, split over the threads (short rows in tiles, the exponentials of a whole tile in one vectorised
// loop); (N,C,D) scores are handled in blocks of D positions, vectorised across the positions. Sums and
// means are reduced in double from per-chunk partials; a label outside [0, C) that is not ignore_index is
// an Error naming the first such element, as in the reference kernel.
// One kernel object must not run on two threads at once (the per-chunk partials are its own).
#include <algorithm>
#include <cmath>
#include <limits>
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

constexpr int64_t kBlock = 256;    // positions of (N,C,D) scores handled together
constexpr int64_t kShortRow = 64;  // (N,C) rows with fewer classes are handled in tiles
constexpr int64_t kTile = 4096;    // scores per tile of short rows

// The loss of one chunk of elements: Σ w·loss, Σ w over the elements not ignored, the first bad label.
struct Partial {
  double total = 0, weight = 0;
  int64_t bad = -1;  // element index of the first label out of range
};

// max and Σ exp(x - max) of a row; writes x - (max + log Σ) to log_prob when it is not null.
ONNXTRAIN_CPU_CLONES float row_log_sum_exp(const float* x, int64_t n, float* log_prob) {
  float max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max)
  for (int64_t i = 0; i < n; ++i) max = x[i] > max ? x[i] : max;
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += cpu::exp_simd(x[i] - max);
  const float lse = max + std::log(sum);
  if (log_prob) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) log_prob[i] = x[i] - lse;
  }
  return lse;
}

// The same for a tile of `rows` short rows (fewer classes than a few vectors, at most kTile scores): the
// exponentials of the whole tile in one vectorised loop over `buffer`, then per-row sums, lse[r] for each.
ONNXTRAIN_CPU_CLONES void short_rows_log_sum_exp(const float* x, int64_t rows, int64_t classes, float* buffer,
                                                 float* lse, float* log_prob) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * classes;
    float max = row[0];
    for (int64_t c = 1; c < classes; ++c) max = row[c] > max ? row[c] : max;
    lse[r] = max;
    for (int64_t c = 0; c < classes; ++c) buffer[r * classes + c] = row[c] - max;
  }
  const int64_t n = rows * classes;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) buffer[i] = cpu::exp_simd(buffer[i]);
  for (int64_t r = 0; r < rows; ++r) {
    float sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += buffer[r * classes + c];
    buffer[r] = sum;  // row r's exponentials are no longer needed once rows 0..r are summed
  }
#pragma omp simd
  for (int64_t r = 0; r < rows; ++r) lse[r] += cpu::log_simd(buffer[r]);
  if (!log_prob) return;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < classes; ++c) log_prob[r * classes + c] = x[r * classes + c] - lse[r];
  }
}

// The same for `width` positions at once, scores of class c at x[c·stride + j]: lse[j] for each.
ONNXTRAIN_CPU_CLONES void column_log_sum_exp(const float* x, int64_t classes, int64_t stride, int64_t width, float* lse,
                                             float* sum, float* log_prob) {
#pragma omp simd
  for (int64_t j = 0; j < width; ++j) lse[j] = x[j];
  for (int64_t c = 1; c < classes; ++c) {
    const float* row = x + c * stride;
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) {
      const float a = lse[j], b = row[j];
      lse[j] = b > a ? b : a;
    }
  }
#pragma omp simd
  for (int64_t j = 0; j < width; ++j) sum[j] = 0;
  for (int64_t c = 0; c < classes; ++c) {
    const float* row = x + c * stride;
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) sum[j] += cpu::exp_simd(row[j] - lse[j]);
  }
#pragma omp simd
  for (int64_t j = 0; j < width; ++j) lse[j] += cpu::log_simd(sum[j]);
  if (!log_prob) return;
  for (int64_t c = 0; c < classes; ++c) {
    const float* row = x + c * stride;
    float* out = log_prob + c * stride;
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) out[j] = row[j] - lse[j];
  }
}

template <typename Label>
class LossKernel final : public Kernel {
 public:
  explicit LossKernel(const LossGeometry& g) : g_(g), partials_(static_cast<size_t>(cpu::max_chunks())) {}

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const float* scores = inputs[0].as<const float>();
    const Label* labels = inputs[1].as<const Label>();
    const float* weights = reference::has_view(inputs, 2) ? inputs[2].as<const float>() : nullptr;
    float* out = outputs[0].as<float>();
    float* log_prob = g_.softmax && reference::has_view(outputs, 1) ? outputs[1].as<float>() : nullptr;
    float* losses = g_.reduction == Reduction::None ? out : nullptr;
    if (partials_.size() < static_cast<size_t>(cpu::max_chunks())) partials_.resize(cpu::max_chunks());
    const bool has_ignore = g_.ignore_index.has_value();
    const int64_t ignore = g_.ignore_index.value_or(0);
    const int64_t classes = g_.classes, inner = g_.inner;

    // Adds element e's loss (its label term `picked`: -log_prob or -input at the label) to `p`.
    auto account = [&](Partial& p, int64_t e, float picked) {
      const int64_t label = static_cast<int64_t>(labels[e]);
      float loss = 0;
      if (!(has_ignore && label == ignore)) {
        if (label < 0 || label >= classes) {
          if (p.bad < 0) p.bad = e;
        } else {
          const float w = weights ? weights[label] : 1.0f;
          loss = -w * picked;
          p.total += static_cast<double>(loss);
          p.weight += static_cast<double>(w);
        }
      }
      if (losses) losses[e] = loss;
    };
    // The label's score of element e (0 when the label is out of range or ignored).
    auto label_score = [&](const float* row_base, int64_t stride, int64_t e) {
      const int64_t label = static_cast<int64_t>(labels[e]);
      return label >= 0 && label < classes ? row_base[label * stride] : 0.0f;
    };

    int chunks = 0;
    if (inner == 1) {
      const int64_t grain = g_.softmax ? std::max<int64_t>(1, 16384 / classes) : 4096;
      chunks = cpu::parallel_chunks(g_.batch, grain, [&](int chunk, int64_t begin, int64_t end) {
        Partial p;
        if (g_.softmax && classes < kShortRow) {
          const int64_t tile_rows = kTile / classes;
          float buffer[kTile], lse[kTile];
          for (int64_t e0 = begin; e0 < end; e0 += tile_rows) {
            const int64_t rows = std::min(tile_rows, end - e0);
            short_rows_log_sum_exp(scores + e0 * classes, rows, classes, buffer, lse,
                                   log_prob ? log_prob + e0 * classes : nullptr);
            for (int64_t r = 0; r < rows; ++r) {
              account(p, e0 + r, label_score(scores + (e0 + r) * classes, 1, e0 + r) - lse[r]);
            }
          }
        } else {
          for (int64_t e = begin; e < end; ++e) {
            const float* row = scores + e * classes;
            if (!g_.softmax) {
              account(p, e, label_score(row, 1, e));
              continue;
            }
            const float lse = row_log_sum_exp(row, classes, log_prob ? log_prob + e * classes : nullptr);
            account(p, e, label_score(row, 1, e) - lse);
          }
        }
        partials_[chunk] = p;
      });
    } else {
      // (n, block of positions) tasks in element order.
      const int64_t blocks_per_n = (inner + kBlock - 1) / kBlock;
      const int64_t grain = g_.softmax ? std::max<int64_t>(1, 64 / classes) : 16;
      chunks = cpu::parallel_chunks(g_.batch * blocks_per_n, grain, [&](int chunk, int64_t begin, int64_t end) {
        Partial p;
        float lse[kBlock], sum[kBlock];
        for (int64_t t = begin; t < end; ++t) {
          const int64_t n = t / blocks_per_n, d0 = (t % blocks_per_n) * kBlock;
          const int64_t width = std::min(kBlock, inner - d0);
          const float* x = scores + n * classes * inner + d0;
          if (g_.softmax) {
            column_log_sum_exp(x, classes, inner, width, lse, sum,
                               log_prob ? log_prob + n * classes * inner + d0 : nullptr);
          }
          for (int64_t j = 0; j < width; ++j) {
            const int64_t e = n * inner + d0 + j;
            account(p, e, label_score(x + j, inner, e) - (g_.softmax ? lse[j] : 0.0f));
          }
        }
        partials_[chunk] = p;
      });
    }
    Partial all;
    for (int c = 0; c < chunks; ++c) {
      if (all.bad < 0) all.bad = partials_[c].bad;
      all.total += partials_[c].total;
      all.weight += partials_[c].weight;
    }
    if (all.bad >= 0) {
      reference::require_label_in_range(g_, g_.softmax ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss",
                                        static_cast<int64_t>(labels[all.bad]), all.bad);
    }
    if (g_.reduction == Reduction::Sum) out[0] = static_cast<float>(all.total);
    if (g_.reduction == Reduction::Mean) out[0] = static_cast<float>(all.total / all.weight);
  }

 private:
  LossGeometry g_;
  std::vector<Partial> partials_;
};

std::unique_ptr<Kernel> make_loss(const KernelSpec& spec) {
  std::unique_ptr<Kernel> reference = cpu::reference_kernel(spec);  // checks the spec as the reference does
  const bool softmax = spec.op_type == "SoftmaxCrossEntropyLoss";
  if (spec.inputs[0].dtype != DType::Float32 || spec.inputs[0].numel() == 0) return reference;
  LossGeometry g = reference::read_loss_geometry(spec, spec.inputs[0].sizes, spec.inputs[1], 2);
  g.softmax = softmax;
  if (g.classes == 0) return reference;
  if (spec.inputs[1].dtype == DType::Int32) return std::make_unique<LossKernel<int32_t>>(g);
  return std::make_unique<LossKernel<int64_t>>(g);
}

}  // namespace

void register_cpu_loss_kernels(KernelRegistry& registry) {
  registry.add(cpu::cpu_entry("SoftmaxCrossEntropyLoss", {DType::Float32}, &make_loss));
  registry.add(cpu::cpu_entry("NegativeLogLikelihoodLoss", {DType::Float32}, &make_loss));
}

}  // namespace onnxtrain
