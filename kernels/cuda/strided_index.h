// Index and stride math of the CUDA data-movement kernels, in plain C++ usable from host and device
// (ONNXTRAIN_HOST_DEVICE), so tests/cuda_data_movement_test.cc checks it on the CPU against naive
// enumeration and the reference kernels' helpers. No CUDA headers, no std containers in device paths.
//
//   StridedMap map = transpose_map(in_sizes, perm);          // host: out index -> input element offset
//   int64_t src = map.source(flat);                           // device: per output element
//   int status = resolve_slice(rank, sizes, expected, args, map);  // device: starts/ends/... -> map
//   int64_t s = pad_source(flat, geometry, begins);           // -1: the constant border
//   int64_t i = gather_row(index, n);                         // -1: out of range
//
// Shapes are limited to kMaxRank dims; the kernels reject larger ranks at prepare time.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/elementwise_derivatives.h"  // ONNXTRAIN_HOST_DEVICE
#include "kernels/pad_index.h"

namespace onnxtrain::cuda_index {

inline constexpr int kMaxRank = 8;

ONNXTRAIN_HOST_DEVICE inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
ONNXTRAIN_HOST_DEVICE inline int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }
ONNXTRAIN_HOST_DEVICE inline int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) {
  return min_i64(max_i64(v, lo), hi);
}

// Element i of an int32 or int64 index input (starts, pads, indices, ...), widened.
ONNXTRAIN_HOST_DEVICE inline int64_t read_index(const void* data, bool is_int64, int64_t i) {
  return is_int64 ? static_cast<const int64_t*>(data)[i] : int64_t{static_cast<const int32_t*>(data)[i]};
}

// Output position (row-major over `sizes`) -> input element offset: base + sum_k idx_k' * strides[k],
// where idx_k' = idx_k % mods[k] when mods[k] > 0 (Tile repeats the input), idx_k otherwise. A stride 0
// broadcasts (Expand), a negative one walks backwards (Slice with negative steps).
struct StridedMap {
  int rank = 0;
  int64_t base = 0;
  int64_t sizes[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  int64_t mods[kMaxRank] = {};

  ONNXTRAIN_HOST_DEVICE int64_t source(int64_t flat) const {
    int64_t offset = base;
    for (int k = rank - 1; k >= 0; --k) {
      const int64_t size = sizes[k];
      int64_t idx = flat % size;
      flat /= size;
      if (mods[k] > 0) idx %= mods[k];
      offset += idx * strides[k];
    }
    return offset;
  }
};

// Row-major strides of sizes[0..rank).
ONNXTRAIN_HOST_DEVICE inline void row_major(int rank, const int64_t* sizes, int64_t* strides) {
  int64_t s = 1;
  for (int k = rank - 1; k >= 0; --k) {
    strides[k] = s;
    s *= sizes[k];
  }
}

// --- host builders (sizes already validated by the kernel's prepare) ---

inline StridedMap identity_map(const std::vector<int64_t>& sizes) {
  StridedMap m;
  m.rank = static_cast<int>(sizes.size());
  for (int k = 0; k < m.rank; ++k) m.sizes[k] = sizes[k];
  row_major(m.rank, m.sizes, m.strides);
  return m;
}

// Transpose: output dim k is input dim perm[k].
inline StridedMap transpose_map(const std::vector<int64_t>& in_sizes, const std::vector<int64_t>& perm) {
  const StridedMap in = identity_map(in_sizes);
  StridedMap m;
  m.rank = in.rank;
  for (int k = 0; k < m.rank; ++k) {
    m.sizes[k] = in.sizes[perm[k]];
    m.strides[k] = in.strides[perm[k]];
  }
  return m;
}

// Expand: numpy broadcast of `in` (aligned at the last dim) onto `out`; broadcast dims read with stride 0.
inline StridedMap expand_map(const std::vector<int64_t>& in_sizes, const std::vector<int64_t>& out_sizes) {
  const StridedMap in = identity_map(in_sizes);
  StridedMap m;
  m.rank = static_cast<int>(out_sizes.size());
  const int offset = m.rank - in.rank;
  for (int k = 0; k < m.rank; ++k) {
    m.sizes[k] = out_sizes[k];
    m.strides[k] = k < offset || in.sizes[k - offset] == 1 ? 0 : in.strides[k - offset];
  }
  return m;
}

// Tile: out dim k = repeats[k] * in[k]; position i along it reads input index i % in[k].
inline StridedMap tile_map(const std::vector<int64_t>& in_sizes, const std::vector<int64_t>& out_sizes) {
  StridedMap m = identity_map(in_sizes);
  for (int k = 0; k < m.rank; ++k) {
    m.mods[k] = in_sizes[k];
    m.sizes[k] = out_sizes[k];
  }
  return m;
}

// --- Slice: numpy slicing of one axis (graph/shape.h numpy_slice, negative steps included) ---

struct SliceAxis {
  int64_t first = 0;
  int64_t count = 0;
};

ONNXTRAIN_HOST_DEVICE inline SliceAxis slice_axis(int64_t start, int64_t end, int64_t step, int64_t size) {
  if (size == 0) return {};
  if (start < 0) start += size;
  if (end < 0) end += size;
  int64_t distance = 0;
  if (step > 0) {
    start = clamp_i64(start, 0, size);
    end = clamp_i64(end, 0, size);
    distance = end - start;
  } else {
    start = clamp_i64(start, 0, size - 1);
    end = clamp_i64(end, -1, size - 1);
    distance = start - end;
  }
  const int64_t magnitude = step > 0 ? step : (step == INT64_MIN ? INT64_MAX : -step);
  return {start, distance > 0 ? (distance - 1) / magnitude + 1 : 0};
}

// Where a run-time slice reads: the int inputs (device pointers on the GPU), each int32 or int64.
// `axes`/`steps` may be null (0..count-1 / all 1).
struct SliceArgs {
  int64_t count = 0;  // entries of starts, ends, axes, steps
  const void* starts = nullptr;
  const void* ends = nullptr;
  const void* axes = nullptr;
  const void* steps = nullptr;
  bool starts_int64 = true, ends_int64 = true, axes_int64 = true, steps_int64 = true;
};

enum SliceStatus : int {
  kSliceOk = 0,
  kSliceBadAxis = 1,
  kSliceRepeatedAxis = 2,
  kSliceZeroStep = 3,
  kSliceSizeMismatch = 4
};

// The map from a sliced tensor's positions (sizes `expected`, what the output was allocated with) into the
// tensor of `sizes` being sliced; a status other than kSliceOk when the arguments are invalid or give other
// sizes than `expected` (the map is then unusable).
ONNXTRAIN_HOST_DEVICE inline int resolve_slice(int rank, const int64_t* sizes, const int64_t* expected,
                                               const SliceArgs& args, StridedMap& map) {
  map.rank = rank;
  map.base = 0;
  row_major(rank, sizes, map.strides);
  bool seen[kMaxRank] = {};
  for (int k = 0; k < rank; ++k) {
    map.sizes[k] = sizes[k];
    map.mods[k] = 0;
  }
  for (int64_t j = 0; j < args.count; ++j) {
    int64_t axis = args.axes ? read_index(args.axes, args.axes_int64, j) : j;
    if (axis < -rank || axis >= rank) return kSliceBadAxis;
    if (axis < 0) axis += rank;
    if (seen[axis]) return kSliceRepeatedAxis;
    seen[axis] = true;
    const int64_t step = args.steps ? read_index(args.steps, args.steps_int64, j) : 1;
    if (step == 0) return kSliceZeroStep;
    const SliceAxis r = slice_axis(read_index(args.starts, args.starts_int64, j),
                                   read_index(args.ends, args.ends_int64, j), step, sizes[axis]);
    map.base += r.first * map.strides[axis];
    map.sizes[axis] = r.count;
    map.strides[axis] = r.count > 1 ? map.strides[axis] * step : 0;  // a huge step taking one element overflows
  }
  for (int k = 0; k < rank; ++k)
    if (map.sizes[k] != expected[k]) return kSliceSizeMismatch;
  return kSliceOk;
}

// --- Pad: the input element a padded position reads (per-axis mapping: kernels/pad_index.h) ---

using onnxtrain::pad_source_index;
using onnxtrain::PadMode;  // kernels/pad_index.h, shared with the reference

// Input and padded sizes of a Pad; begins[k] is the begin pad of axis k (negative crops).
struct PadGeometry {
  int rank = 0;
  PadMode mode = PadMode::Constant;
  int64_t in[kMaxRank] = {};
  int64_t out[kMaxRank] = {};
  int64_t in_strides[kMaxRank] = {};
};

// The flat input element padded position `flat` reads, or -1 for the constant.
ONNXTRAIN_HOST_DEVICE inline int64_t pad_source(int64_t flat, const PadGeometry& g, const int64_t* begins) {
  int64_t source = 0;
  for (int k = g.rank - 1; k >= 0; --k) {
    const int64_t idx = flat % g.out[k];
    flat /= g.out[k];
    const int64_t i = pad_source_index(idx - begins[k], g.in[k], g.mode);
    if (i < 0) return -1;
    source += i * g.in_strides[k];
  }
  return source;
}

enum PadStatus : int { kPadOk = 0, kPadBadAxis = 1, kPadSizeMismatch = 2, kPadEmptyAxis = 3 };

// Begin pads per axis from a run-time `pads` input ([begins..., ends...] over `axes`, or over every axis
// when axes is null); a status other than kPadOk when an axis is out of range or the pads do not give
// the padded sizes g.out.
ONNXTRAIN_HOST_DEVICE inline int resolve_pad_begins(const PadGeometry& g, const void* pads, bool pads_int64,
                                                    const void* axes, bool axes_int64, int64_t axis_count,
                                                    int64_t* begins) {
  int64_t ends[kMaxRank] = {};
  for (int k = 0; k < g.rank; ++k) begins[k] = 0;
  for (int64_t j = 0; j < axis_count; ++j) {
    int64_t axis = axes ? read_index(axes, axes_int64, j) : j;
    if (axis < -g.rank || axis >= g.rank) return kPadBadAxis;
    if (axis < 0) axis += g.rank;
    begins[axis] = read_index(pads, pads_int64, j);
    ends[axis] = read_index(pads, pads_int64, j + axis_count);
  }
  for (int k = 0; k < g.rank; ++k)
    if (g.in[k] + begins[k] + ends[k] != g.out[k]) return kPadSizeMismatch;
  return kPadOk;
}

// PadGrad at input element `flat_in`: the sum of dy over every padded position whose source is it, added
// in increasing padded order (the order the reference accumulates in, so the sums agree bit for bit).
// Along an axis the positions reading input index i are the interior one (i + begin) and some of the
// border ones ([0, begin) and [begin + in, out)), which are visited in increasing order around it.
template <typename T>
ONNXTRAIN_HOST_DEVICE T pad_grad_sum(int64_t flat_in, const PadGeometry& g, const int64_t* begins, const T* dy) {
  int64_t target[kMaxRank], lo_end[kMaxRank], hi_begin[kMaxRank], out_strides[kMaxRank];
  int64_t candidates[kMaxRank], counter[kMaxRank];
  row_major(g.rank, g.out, out_strides);
  for (int k = g.rank - 1; k >= 0; --k) {
    target[k] = flat_in % g.in[k];
    flat_in /= g.in[k];
    lo_end[k] = clamp_i64(begins[k], 0, g.out[k]);
    hi_begin[k] = clamp_i64(begins[k] + g.in[k], lo_end[k], g.out[k]);
    // constant mode: the border reads the constant, only the interior position counts
    candidates[k] = g.mode == PadMode::Constant ? 1 : lo_end[k] + 1 + (g.out[k] - hi_begin[k]);
    counter[k] = 0;
  }
  // candidate c along axis k: c < lo_end -> border position c; c == lo_end -> the interior position;
  // above -> border position hi_begin + (c - lo_end - 1). Constant mode has only the interior one.
  auto position = [&](int k, int64_t c) -> int64_t {
    if (g.mode == PadMode::Constant) return target[k] + begins[k];
    if (c < lo_end[k]) return c;
    if (c == lo_end[k]) return target[k] + begins[k];
    return hi_begin[k] + (c - lo_end[k] - 1);
  };
  auto reads_target = [&](int k, int64_t p) {
    return p >= 0 && p < g.out[k] && pad_source_index(p - begins[k], g.in[k], g.mode) == target[k];
  };
  T sum = T(0);
  for (int k = 0; k < g.rank; ++k)
    if (candidates[k] == 0) return sum;
  while (true) {
    int64_t offset = 0;
    bool hit = true;
    for (int k = 0; k < g.rank && hit; ++k) {
      const int64_t p = position(k, counter[k]);
      hit = reads_target(k, p);
      offset += p * out_strides[k];
    }
    if (hit) sum += dy[offset];
    int k = g.rank - 1;
    for (; k >= 0; --k) {
      if (++counter[k] < candidates[k]) break;
      counter[k] = 0;
    }
    if (k < 0) return sum;
  }
}

// --- Gather / GatherGrad along one axis: data (outer, n, inner), indices (count) -> (outer, count, inner) ---

struct GatherGeometry {
  int64_t outer = 1, n = 0, inner = 1, count = 0;
};

// Index value v along an axis of n: v itself, or v + n for a negative v; -1 when v is outside [-n, n).
ONNXTRAIN_HOST_DEVICE inline int64_t gather_row(int64_t v, int64_t n) {
  if (v < -n || v >= n) return -1;
  return v < 0 ? v + n : v;
}

// The data element output position `flat` reads, or -1 when its index is outside [-n, n).
ONNXTRAIN_HOST_DEVICE inline int64_t gather_source(int64_t flat, const GatherGeometry& g, const void* indices,
                                                   bool indices_int64) {
  const int64_t k = flat % g.inner;
  const int64_t j = (flat / g.inner) % g.count;
  const int64_t o = flat / (g.inner * g.count);
  const int64_t i = gather_row(read_index(indices, indices_int64, j), g.n);
  return i < 0 ? -1 : (o * g.n + i) * g.inner + k;
}

// --- Concat / Split: each input is one block copy of `rows` rows into the output ---

// A 2-D copy (cudaMemcpy2DAsync): `rows` rows of `width` elements, from a source with `src_pitch`
// elements per row starting at `src_offset` into a destination with `dst_pitch` starting at `dst_offset`.
struct BlockCopy {
  int64_t rows = 0, width = 0, src_pitch = 0, dst_pitch = 0, src_offset = 0, dst_offset = 0;
};

// cudaMemcpy2DAsync fails with cudaErrorInvalidPitchValue for a pitch above cudaDevAttrMaxPitch, which is
// 2^31 - 1 bytes on every current GPU. A Concat/Split along axis 0 (outer == 1) of a tensor over 2 GiB
// passes the whole tensor's row as the pitch, so such copies must not go through the 2-D call.
inline constexpr int64_t kMaxCopyPitchBytes = 2147483647;

// How copy_block enqueues a block copy of `element`-byte elements: nothing, one 1-D copy of rows·width
// elements (the rows lie back to back in both tensors, or there is one row), one 2-D copy, or (a pitch
// above kMaxCopyPitchBytes) one 1-D copy per row.
enum class BlockCopyKind { Empty, Flat, Pitched, RowByRow };

inline BlockCopyKind block_copy_kind(const BlockCopy& b, int64_t element) {
  if (b.rows == 0 || b.width == 0) return BlockCopyKind::Empty;
  if (b.rows == 1 || (b.src_pitch == b.width && b.dst_pitch == b.width)) return BlockCopyKind::Flat;
  if (b.src_pitch * element > kMaxCopyPitchBytes || b.dst_pitch * element > kMaxCopyPitchBytes)
    return BlockCopyKind::RowByRow;
  return BlockCopyKind::Pitched;
}

// Concat of parts with `axis_sizes` along an axis of (outer, axis, inner) tensors: part i's block copy.
inline std::vector<BlockCopy> concat_blocks(int64_t outer, int64_t inner, const std::vector<int64_t>& axis_sizes) {
  int64_t total = 0;
  for (int64_t s : axis_sizes) total += s;
  std::vector<BlockCopy> blocks;
  int64_t offset = 0;
  for (int64_t s : axis_sizes) {
    blocks.push_back({outer, s * inner, s * inner, total * inner, 0, offset * inner});
    offset += s;
  }
  return blocks;
}

// Split is Concat backwards: part i reads the rows Concat writes.
inline std::vector<BlockCopy> split_blocks(int64_t outer, int64_t inner, const std::vector<int64_t>& axis_sizes) {
  std::vector<BlockCopy> blocks = concat_blocks(outer, inner, axis_sizes);
  for (BlockCopy& b : blocks) {
    std::swap(b.src_pitch, b.dst_pitch);
    std::swap(b.src_offset, b.dst_offset);
  }
  return blocks;
}

}  // namespace onnxtrain::cuda_index
