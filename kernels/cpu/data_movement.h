// What the "cpu" data-movement kernels (Transpose, Concat, Split, Slice, Gather, Expand, Tile, Pad, Cast,
// Reshape & co. and the backward ops SliceGrad, GatherGrad, PadGrad) share:
// - CpuDataMovementKernel: keeps the reference kernel prepared for the same spec. It is prepared first, so
//   a spec the op rejects fails with the reference kernel's message; run_reference() runs it for data the
//   fast path does not take (a bad index, a bound list that does not fit), which then fails (or, for a rare
//   configuration, is computed) exactly as the reference kernel does.
// - RunKey: the sizes and small int inputs (starts, pads, shape, repeats) a prepared plan depends on;
//   run() replans only when they change, so strides and collapsed dims are computed once, not per run.
// - StridedCopy: a copy between two strided views of one element size, dims collapsed at plan time; runs
//   contiguous rows as memcpy, broadcast rows as fills, transposed views in cache tiles, over OpenMP threads.
//
//   StridedCopy copy;   // prepare: a transpose of a (2,3) float32 input, read with strides (1,3)
//   if (!StridedCopy::plan(4, {3, 2}, {1, 3}, {2, 1}, 0, 0, copy)) ...;  // keep the reference kernel
//   copy.run(inputs[0].data, outputs[0].data);                            // run
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/reference/copy.h"

namespace onnxtrain::cpu {

// Bytes a parallel chunk of copying should move at least (waking a thread costs a few microseconds).
constexpr int64_t kCopyGrainBytes = 64 * 1024;

class CpuDataMovementKernel : public Kernel {
 protected:
  explicit CpuDataMovementKernel(const KernelSpec& spec);
  void run_reference(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
    reference_->run(stream, inputs, outputs);
  }
  [[noreturn]] void fail(const std::string& message) const { reference::kernel_fail(spec_, message); }

  KernelSpec spec_;
  std::unique_ptr<Kernel> reference_;
};

// The run-time facts a kernel's plan depends on: every argument's sizes and the values of the int inputs
// named. Kept in reused buffers: no allocation once the facts repeat.
class RunKey {
 public:
  // Reads this run's facts; true when they differ from the last call's (or on the first call).
  bool changed(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
               std::initializer_list<size_t> value_inputs);

 private:
  std::vector<int64_t> key_, scratch_;
  bool empty_ = true;
};

// Reads element i of an int32 or int64 view.
inline int64_t int_at(const TensorView& view, int64_t i) {
  return view.dtype == DType::Int32 ? int64_t{view.as<const int32_t>()[i]} : view.as<const int64_t>()[i];
}

// reference::dispatch_element_size under the name the "cpu" kernels use.
template <typename Fn>
bool dispatch_bytes(size_t bytes, Fn&& fn) {
  return reference::dispatch_element_size(bytes, std::forward<Fn>(fn));
}

// memcpy / memset split across the threads for large buffers.
void parallel_copy(void* dst, const void* src, int64_t bytes);
void parallel_zero(void* dst, int64_t bytes);

// dst[dst_base + sum_k i_k * dst_strides[k]] = src[src_base + sum_k i_k * src_strides[k]] for every index of
// `sizes` (strides and bases in elements; a 0 stride broadcasts, a negative one walks backwards).
class StridedCopy {
 public:
  static constexpr int kMaxRank = 32;

  // Collapses dims and picks the loop; false when the copy has more than kMaxRank dims left or the element
  // size is not 1, 2, 4 or 8 bytes (the caller keeps the reference kernel for it).
  static bool plan(size_t element, const std::vector<int64_t>& sizes, const std::vector<int64_t>& src_strides,
                   const std::vector<int64_t>& dst_strides, int64_t src_base, int64_t dst_base, StridedCopy& out);
  void run(const void* src, void* dst) const;

 private:
  enum class Loop { Rows, Fill, Strided, Tiles };
  template <typename T>
  void run_typed(const T* src, T* dst) const;

  size_t element_ = 0;
  Loop loop_ = Loop::Rows;
  int rank_ = 0;  // collapsed; the last dim is the inner one
  int64_t sizes_[kMaxRank] = {}, src_[kMaxRank] = {}, dst_[kMaxRank] = {};
  int64_t src_base_ = 0, dst_base_ = 0, numel_ = 0;
  int tile_dim_ = -1;  // Tiles: the dim whose source stride is 1 (the inner dim's is not)
};

// A kernel that is one StridedCopy from input 0 to output 0 (Expand, Tile, Slice), planned again only
// when its RunKey changes; data the plan does not take runs on the reference kernel.
//
//   run_copy(stream, inputs, outputs, key_.changed(inputs, outputs, {1}), [&] { return StridedCopy::plan(...); });
class CpuCopyKernel : public CpuDataMovementKernel {
 protected:
  using CpuDataMovementKernel::CpuDataMovementKernel;
  // Where `changed`, plan() (true when it planned copy_) decides whether the copy runs (not when plan throws:
  // the next run takes the reference kernel); then copies.
  template <typename Plan>
  void run_copy(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs, bool changed,
                Plan&& plan) {
    if (changed) {
      valid_ = false;
      valid_ = plan();
    }
    if (!valid_) return run_reference(stream, inputs, outputs);
    copy_.run(inputs[0].data, outputs[0].data);
  }

  RunKey key_;
  bool valid_ = false;
  StridedCopy copy_;
};

}  // namespace onnxtrain::cpu
