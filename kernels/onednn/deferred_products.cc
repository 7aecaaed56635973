// Deferred sums of products (deferred_products.h).
#include "kernels/onednn/deferred_products.h"

#include <algorithm>
#include <memory>

#include "kernels/onednn/tap_product_conv.h"

namespace onnxtrain::onednn {

float* StagedRows::add_run(int64_t rows) {
  rows_ += rows;
  run_rows_.push_back(rows);
  runs_.emplace_back(static_cast<size_t>(positions_ * rows * width_));
  return runs_.back().data();
}

const float* StagedRows::packed() {
  if (runs_.size() == 1) return runs_[0].data();
  packed_.resize(static_cast<size_t>(positions_ * rows_ * width_));
  float* to = packed_.data();
  for (int64_t p = 0; p < positions_; ++p) {
    for (size_t r = 0; r < runs_.size(); ++r) {
      const int64_t block = run_rows_[r] * width_;
      const float* from = runs_[r].data() + p * block;
      to = std::copy(from, from + block, to);
    }
  }
  return packed_.data();
}

namespace {

struct DeferredTransposedProduct final : Stream::DeferredProduct {
  DeferredTransposedProduct(int64_t a_cols, int64_t b_cols)
      : a(1, a_cols), b(1, b_cols), a_cols(a_cols), b_cols(b_cols) {}
  void finish(float* out, bool adds) override {
    gemm(true, false, a_cols, b_cols, a.rows(), a.packed(), a_cols, b.packed(), b_cols, adds ? 1.0f : 0.0f, out,
         b_cols);
  }

  StagedRows a, b;
  const int64_t a_cols, b_cols;
};

}  // namespace

void stage_transposed_product(Stream::OutputSum& sum, const float* a, const float* b, int64_t rows, int64_t a_cols,
                              int64_t b_cols) {
  // The buffer's sum belongs to the one node that writes it, so a deferred product there is this kind.
  if (!sum.deferred) sum.deferred = std::make_shared<DeferredTransposedProduct>(a_cols, b_cols);
  auto& product = static_cast<DeferredTransposedProduct&>(*sum.deferred);
  std::copy(a, a + rows * a_cols, product.a.add_run(rows));
  std::copy(b, b + rows * b_cols, product.b.add_run(rows));
}

}  // namespace onnxtrain::onednn
