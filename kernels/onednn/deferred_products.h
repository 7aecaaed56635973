// Products summed over runs and deferred to the end of the sum (Stream::DeferredProduct): a pipeline's
// micro-batch weight gradients dW = Σ_runs Xᵀ·dY, where W is far larger than the rows that make it.
// Computed run by run, each micro-batch reads and writes all of W for a few rows of work: ResNet-18's
// layer4 weight gradients at micro-batches of 8 cost 2.5x their share of a batch of 32, layer3's 2.1x
// (training_step_profile). Deferred, each run copies its rows (kilobytes) and the sum ends with one product
// over all of them, as one run of the whole mini-batch would compute it.
//
//   if (stream.defers_sums() && worth_deferring(dw_elements, rows * (a_cols + b_cols)))
//     DeferredTransposedProduct::stage(*sum, spare_, a, b, rows, a_cols, b_cols);   // instead of the product
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/kernel.h"

namespace onnxtrain::onednn {

// An operand's rows staged run by run. A run's operand is position-major: `positions` blocks of its
// `rows` rows of `width` values (a convolution's tap products transpose X to positions × batch ×
// channels; a plain matrix is one position). packed() lays every run's rows of a position side by side,
// as one run of rows() rows would hold them.
class StagedRows {
 public:
  StagedRows(int64_t positions, int64_t width) : positions_(positions), width_(width) {}
  // Room for a run of `rows` rows, to be filled position-major as above.
  float* add_run(int64_t rows);
  int64_t rows() const { return rows_; }
  const float* packed();  // positions × rows() × width
  void clear();           // no runs; their memory kept for the next sum's

 private:
  int64_t positions_, width_, rows_ = 0;
  size_t used_ = 0;                       // runs_[0, used_) are this sum's
  std::vector<std::vector<float>> runs_;  // kept across sums: a pipeline's every mini-batch stages as much
  std::vector<int64_t> run_rows_;
  std::vector<float> packed_;
};

// The object a kernel stages a sum's operands in (a Stream::DeferredProduct), reused across sums once the
// session is done with the last one (it drops it at finish_sums), so that staging allocates nothing after
// the first mini-batch: `make` builds one when there is none to reuse, `reset(product)` empties one.
template <typename Product, typename Make, typename Reset>
Product& staging_for(Stream::OutputSum& sum, std::shared_ptr<Product>& spare, Make&& make, Reset&& reset) {
  if (!sum.deferred) {
    if (!spare || spare.use_count() > 1) {
      spare = make();
    } else {
      reset(*spare);
    }
    sum.deferred = spare;
  }
  // The buffer's sum belongs to the one node that writes it, so its deferred product is this kernel's.
  return static_cast<Product&>(*sum.deferred);
}

// Whether staging `staged` elements per run saves work against reading and writing an output of
// `output` elements per run.
inline bool worth_deferring(int64_t output, int64_t staged) { return output > staged; }

// Y (a_cols × b_cols) summed over runs, Y = Aᵀ·B with A (rows × a_cols) and B (rows × b_cols) row-major
// (a Gemm's weight gradient dYᵀ·X), deferred: each run's rows staged by stage().
class DeferredTransposedProduct final : public Stream::DeferredProduct {
 public:
  DeferredTransposedProduct(int64_t a_cols, int64_t b_cols)
      : a_cols_(a_cols), b_cols_(b_cols), a_(1, a_cols), b_(1, b_cols) {}
  // This run's rows into the sum's product, made (or reused from `spare`) at the sum's first run.
  static void stage(Stream::OutputSum& sum, std::shared_ptr<DeferredTransposedProduct>& spare, const float* a,
                    const float* b, int64_t rows, int64_t a_cols, int64_t b_cols);
  void finish(float* out, bool adds) override;

 private:
  int64_t a_cols_, b_cols_;
  StagedRows a_, b_;
};

}  // namespace onnxtrain::onednn
