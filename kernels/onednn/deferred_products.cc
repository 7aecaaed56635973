// Deferred sums of products (deferred_products.h).
#include "kernels/onednn/deferred_products.h"

#include <algorithm>

#include "kernels/onednn/tap_product_conv.h"

namespace onnxtrain::onednn {

float* StagedRows::add_run(int64_t rows) {
  rows_ += rows;
  if (used_ == runs_.size()) {
    runs_.emplace_back();
    run_rows_.push_back(0);
  }
  run_rows_[used_] = rows;
  std::vector<float>& run = runs_[used_++];
  run.resize(static_cast<size_t>(positions_ * rows * width_));
  return run.data();
}

const float* StagedRows::packed() {
  if (used_ == 1) return runs_[0].data();
  packed_.resize(static_cast<size_t>(positions_ * rows_ * width_));
  float* to = packed_.data();
  for (int64_t p = 0; p < positions_; ++p) {
    for (size_t r = 0; r < used_; ++r) {
      const int64_t block = run_rows_[r] * width_;
      const float* from = runs_[r].data() + p * block;
      to = std::copy(from, from + block, to);
    }
  }
  return packed_.data();
}

void StagedRows::clear() {
  rows_ = 0;
  used_ = 0;
}

void DeferredTransposedProduct::stage(Stream::OutputSum& sum, std::shared_ptr<DeferredTransposedProduct>& spare,
                                      const float* a, const float* b, int64_t rows, int64_t a_cols, int64_t b_cols) {
  DeferredTransposedProduct& product = staging_for(
      sum, spare, [&] { return std::make_shared<DeferredTransposedProduct>(a_cols, b_cols); },
      [](DeferredTransposedProduct& p) {
        p.a_.clear();
        p.b_.clear();
      });
  std::copy(a, a + rows * a_cols, product.a_.add_run(rows));
  std::copy(b, b + rows * b_cols, product.b_.add_run(rows));
}

void DeferredTransposedProduct::finish(float* out, bool adds) {
  gemm(true, false, a_cols_, b_cols_, a_.rows(), a_.packed(), a_cols_, b_.packed(), b_cols_, adds ? 1.0f : 0.0f, out,
       b_cols_);
}

}  // namespace onnxtrain::onednn
