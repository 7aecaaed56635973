// Index geometry of the CUDA reductions, softmax, losses and normalisations, in plain C++ so the CPU
// tests cover it (tests/cuda_reduce_loss_test.cc) and nvcc compiles the same code for the device.
//
// A reduction over any set of axes is done without permuting the input: the dims are split into kept
// dims (which index the output) and reduced dims (which index the elements one output folds), adjacent
// dims of the same kind merged and size-1 dims dropped. Output element `o` and reduced element `r`
// decompose row-major into those two groups; the input offset is the sum of coordinate × input stride.
//
//   const ReduceGeometry g = make_reduce_geometry({2, 3, 4}, {true, false, true});  // reduce axes 0, 2
//   // g.out_numel == 3, g.count == 8
//   for (int64_t o = 0; o < g.out_numel; ++o)
//     for (int64_t r = 0; r < g.count; ++r) acc[o] += x[g.input_offset(o, r)];
//
// BroadcastIndex maps an element of a tensor to the element of a smaller tensor broadcast onto it
// (LayerNormalization's Scale and B onto the normalised dims).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#ifndef ONNXTRAIN_HOST_DEVICE
#if defined(__CUDACC__)
#define ONNXTRAIN_HOST_DEVICE __host__ __device__
#else
#define ONNXTRAIN_HOST_DEVICE
#endif
#endif

namespace onnxtrain::cuda {

// Rank of a merged kept/reduced group that a kernel argument can carry by value. Merging makes this a
// limit on alternations of kept and reduced dims, not on the input's rank.
inline constexpr int kMaxReduceDims = 8;

// Dims of one group (kept or reduced), outermost first, with the input's stride for each.
struct DimGroup {
  int rank = 0;
  int64_t sizes[kMaxReduceDims] = {};
  int64_t strides[kMaxReduceDims] = {};

  // The input offset of the group's row-major element `index`.
  ONNXTRAIN_HOST_DEVICE int64_t offset(int64_t index) const {
    int64_t off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t q = index / sizes[d];
      off += (index - q * sizes[d]) * strides[d];
      index = q;
    }
    return off;
  }
};

struct ReduceGeometry {
  int64_t out_numel = 1;  // output elements (product of kept sizes)
  int64_t count = 1;      // input elements per output element (product of reduced sizes)
  DimGroup kept, reduced;

  ONNXTRAIN_HOST_DEVICE int64_t input_offset(int64_t out_index, int64_t reduced_index) const {
    return kept.offset(out_index) + reduced.offset(reduced_index);
  }
};

// The geometry of reducing `sizes` over the dims marked in `reduced` (same length). nullopt when the
// merged groups need more than kMaxReduceDims dims each (more than 8 alternations of kept and reduced).
inline std::optional<ReduceGeometry> make_reduce_geometry(const std::vector<int64_t>& sizes,
                                                          const std::vector<bool>& reduced) {
  ReduceGeometry g;
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
  // Merge runs of the same kind: dim d joins the previous dim of its group when that dim was the one
  // right after it in memory (previous.stride == size_d * stride_d) and no dim of the other kind came
  // between them.
  int last_kind = -1;  // 0 kept, 1 reduced, of the last non-trivial dim
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (reduced[d]) {
      g.count *= sizes[d];
    } else {
      g.out_numel *= sizes[d];
    }
    if (sizes[d] == 1) continue;  // contributes nothing to either index
    const int kind = reduced[d] ? 1 : 0;
    DimGroup& group = kind ? g.reduced : g.kept;
    if (kind == last_kind && group.rank > 0) {
      group.sizes[group.rank - 1] *= sizes[d];
      group.strides[group.rank - 1] = strides[d];
    } else {
      if (group.rank == kMaxReduceDims) return std::nullopt;
      group.sizes[group.rank] = sizes[d];
      group.strides[group.rank] = strides[d];
      ++group.rank;
    }
    last_kind = kind;
  }
  // A zero-size dim: no index is ever decomposed, but keep sizes nonzero-safe for division.
  for (DimGroup* group : {&g.kept, &g.reduced})
    for (int d = 0; d < group->rank; ++d)
      if (group->sizes[d] == 0) group->sizes[d] = 1;
  return g;
}

// An element of the `target` dims mapped to the element of `from` broadcast onto them (numpy rules,
// aligned at the last dim). Dims where `from` has size 1 get stride 0.
struct BroadcastIndex {
  DimGroup dims;  // target's dims (merged), each with from's stride (0 where broadcast)

  ONNXTRAIN_HOST_DEVICE int64_t operator()(int64_t target_index) const { return dims.offset(target_index); }
};

// nullopt when `from` does not broadcast onto `target` or needs more than kMaxReduceDims merged dims.
inline std::optional<BroadcastIndex> make_broadcast_index(const std::vector<int64_t>& from,
                                                          const std::vector<int64_t>& target) {
  if (from.size() > target.size()) return std::nullopt;
  const size_t lead = target.size() - from.size();
  std::vector<int64_t> from_strides(from.size(), 1);
  for (size_t d = from.size(); d-- > 1;) from_strides[d - 1] = from_strides[d] * from[d];
  BroadcastIndex b;
  bool last_broadcast = false;
  int64_t last_from_stride = 0;
  for (size_t d = 0; d < target.size(); ++d) {
    const int64_t f = d < lead ? 1 : from[d - lead];
    if (f != 1 && f != target[d]) return std::nullopt;
    if (target[d] == 1) continue;
    const bool broadcast = f == 1;
    const int64_t stride = broadcast ? 0 : from_strides[d - lead];
    DimGroup& g = b.dims;
    // Merge with the previous dim when both are broadcast, or both are contiguous in `from`.
    const bool mergeable =
        g.rank > 0 && broadcast == last_broadcast && (broadcast || last_from_stride == target[d] * stride);
    if (mergeable) {
      g.sizes[g.rank - 1] *= target[d];
      g.strides[g.rank - 1] = stride;
    } else {
      if (g.rank == kMaxReduceDims) return std::nullopt;
      g.sizes[g.rank] = target[d];
      g.strides[g.rank] = stride;
      ++g.rank;
    }
    last_broadcast = broadcast;
    last_from_stride = stride;
  }
  for (int d = 0; d < b.dims.rank; ++d)
    if (b.dims.sizes[d] == 0) b.dims.sizes[d] = 1;
  return b;
}

// A tensor seen as (outer, n, inner) around one axis (Softmax, ArgMax, the losses' class axis).
struct AxisGeometry {
  int64_t outer = 1, n = 1, inner = 1;
  ONNXTRAIN_HOST_DEVICE int64_t offset(int64_t o, int64_t k, int64_t i) const { return (o * n + k) * inner + i; }
};

}  // namespace onnxtrain::cuda
