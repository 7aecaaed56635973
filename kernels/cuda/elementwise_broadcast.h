// The index map of a broadcasting elementwise CUDA kernel, computed once on the host at prepare time and
// passed by value to the kernel: the output's sizes and each input's strides over the output's index
// space (0 along broadcast dims), after merging adjacent dims that every input walks contiguously and
// dropping dims of size 1, so that most launches have rank 1 (a flat loop) or 2. Plain C++ with
// ONNXTRAIN_HOST_DEVICE offsets: the CPU tests check it against a naive index mapping.
//
//   const BroadcastGeometry g = make_broadcast_geometry(out_sizes, {a.sizes, b.sizes});
//   // device, for output element i:
//   int64_t offsets[kMaxBroadcastInputs];
//   g.input_offsets(i, offsets);                 // a[offsets[0]], b[offsets[1]]
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/elementwise_derivatives.h"  // ONNXTRAIN_HOST_DEVICE

namespace onnxtrain::cuda {

inline constexpr int kMaxBroadcastRank = 8;    // after merging; more is a prepare-time Error
inline constexpr int kMaxBroadcastInputs = 3;  // Where; variadic ops fold two at a time

struct BroadcastGeometry {
  int rank = 0;    // 1..kMaxBroadcastRank after make_broadcast_geometry (rank 1 is a flat loop)
  int inputs = 0;  // 1..kMaxBroadcastInputs
  int64_t numel = 0;
  int64_t sizes[kMaxBroadcastRank] = {};
  int64_t strides[kMaxBroadcastInputs][kMaxBroadcastRank] = {};

  // Whether every input is either laid out like the output (stride 1) or a scalar (stride 0) over a
  // rank-1 space: the kernels then skip the index arithmetic.
  ONNXTRAIN_HOST_DEVICE bool flat() const { return rank == 1; }

  // Element offset of each input for output element `flat_index` (row-major).
  ONNXTRAIN_HOST_DEVICE void input_offsets(int64_t flat_index, int64_t* offsets) const {
    for (int k = 0; k < inputs; ++k) offsets[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t size = sizes[d];
      const int64_t index = flat_index % size;
      flat_index /= size;
      for (int k = 0; k < inputs; ++k) offsets[k] += index * strides[k][d];
    }
  }
};

// Sizes of `out` and of the inputs (numpy-broadcastable onto `out`); nullopt when more than
// kMaxBroadcastRank dims remain after merging or more than kMaxBroadcastInputs inputs are given.
inline std::optional<BroadcastGeometry> make_broadcast_geometry(const std::vector<int64_t>& out,
                                                                const std::vector<std::vector<int64_t>>& ins) {
  if (ins.empty() || ins.size() > static_cast<size_t>(kMaxBroadcastInputs)) return std::nullopt;
  const size_t rank = out.size();
  // Each input's strides over out's dims, 0 along broadcast (size-1 or missing leading) dims.
  std::vector<std::vector<int64_t>> strides(ins.size(), std::vector<int64_t>(rank, 0));
  for (size_t k = 0; k < ins.size(); ++k) {
    const std::vector<int64_t>& in = ins[k];
    if (in.size() > rank) return std::nullopt;
    int64_t stride = 1;
    for (size_t i = in.size(); i-- > 0;) {
      strides[k][rank - in.size() + i] = in[i] == 1 ? 0 : stride;
      stride *= in[i];
    }
  }
  // Merge from the innermost dim outwards: dim d joins the group below it when every input steps
  // through d exactly as if the two dims were one (stride_d == stride_below * size_below; 0 == 0 too).
  std::vector<int64_t> merged_sizes;                             // innermost first
  std::vector<std::vector<int64_t>> merged_strides(ins.size());  // innermost first
  for (size_t i = rank; i-- > 0;) {
    if (out[i] == 1) continue;  // contributes nothing to any offset
    bool joins = !merged_sizes.empty();
    for (size_t k = 0; joins && k < ins.size(); ++k)
      joins = strides[k][i] == merged_strides[k].back() * merged_sizes.back();
    if (joins) {
      merged_sizes.back() *= out[i];
    } else {
      merged_sizes.push_back(out[i]);
      for (size_t k = 0; k < ins.size(); ++k) merged_strides[k].push_back(strides[k][i]);
    }
  }
  if (merged_sizes.empty()) {  // a scalar output (or every dim of size 1): one element, one flat dim
    merged_sizes.push_back(1);
    for (auto& s : merged_strides) s.push_back(0);
  }
  if (merged_sizes.size() > static_cast<size_t>(kMaxBroadcastRank)) return std::nullopt;
  BroadcastGeometry g;
  g.rank = static_cast<int>(merged_sizes.size());
  g.inputs = static_cast<int>(ins.size());
  g.numel = 1;
  for (int64_t s : out) g.numel *= s;
  for (int d = 0; d < g.rank; ++d) {
    const size_t from = merged_sizes.size() - 1 - static_cast<size_t>(d);  // back to outermost first
    g.sizes[d] = merged_sizes[from];
    for (size_t k = 0; k < ins.size(); ++k) g.strides[k][d] = merged_strides[k][from];
  }
  return g;
}

}  // namespace onnxtrain::cuda
