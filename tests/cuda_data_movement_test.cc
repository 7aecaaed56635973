// The CUDA data-movement kernels. On the CPU (everywhere): the host/device index math of
// kernels/cuda/strided_index.h against naive enumeration and against the reference kernels' own helpers
// (numpy_slice, slice_view, pad_mode.h): transpose/expand/tile maps, slice resolution with its error
// statuses, pad source mapping and begin pads, the deterministic PadGrad sum (bit-equal to the
// reference's scatter order), Gather index normalisation, Concat/Split block copies; and the registry's
// CUDA entries. On a GPU (skipped, saying so, when no CUDA device is visible): every CUDA data-movement
// kernel against the reference kernel, bit for bit, and the lazily reported Gather index fault.
// GatherElements, ScatterElements, GatherND and their backward ops: cuda_element_index_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>
#include <random>

#include "graph/error.h"
#include "graph/shape.h"
#include "kernels/cuda/cuda_runtime.h"
#include "kernels/cuda/strided_index.h"
#include "kernels/kernel.h"
#include "kernels/reference/pad_mode.h"
#include "kernels/reference/slice_view.h"
#include "tests/cuda_data_movement_cases.h"
#include "tests/reference_kernel_call.h"

using namespace onnxtrain;
using namespace onnxtrain::cuda_index;
using namespace onnxtrain::cuda_data_movement_cases;

namespace {

// The row-major multi-index of `flat` over `sizes`.
Ints unflatten(int64_t flat, const Ints& sizes) {
  Ints index(sizes.size());
  for (size_t k = sizes.size(); k-- > 0;) {
    index[k] = flat % sizes[k];
    flat /= sizes[k];
  }
  return index;
}

int64_t flatten(const Ints& index, const Ints& sizes) {
  int64_t flat = 0;
  for (size_t k = 0; k < sizes.size(); ++k) flat = flat * sizes[k] + index[k];
  return flat;
}

// --- CPU: index math against naive enumeration ---

TEST(CudaDataMovementIndex, TransposeMapReadsThePermutedElement) {
  for (int trial = 0; trial < 40; ++trial) {
    const int rank = static_cast<int>(uniform(1, 5));
    const Ints in = random_sizes(rank);
    Ints perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng());
    Ints out(rank);
    for (int k = 0; k < rank; ++k) out[k] = in[perm[k]];
    const StridedMap map = transpose_map(in, perm);
    for (int64_t flat = 0; flat < numel(out); ++flat) {
      const Ints o = unflatten(flat, out);
      Ints i(rank);
      for (int k = 0; k < rank; ++k) i[perm[k]] = o[k];  // output dim k is input dim perm[k]
      ASSERT_EQ(map.source(flat), flatten(i, in)) << "trial " << trial << " flat " << flat;
    }
  }
}

TEST(CudaDataMovementIndex, ExpandAndTileMapsBroadcastAndRepeat) {
  for (int trial = 0; trial < 40; ++trial) {
    const int rank = static_cast<int>(uniform(1, 4));
    const int in_rank = static_cast<int>(uniform(0, rank));
    Ints out = random_sizes(rank), in(in_rank);
    for (int k = 0; k < in_rank; ++k) in[k] = uniform(0, 1) ? 1 : out[rank - in_rank + k];
    const StridedMap expand = expand_map(in, out);
    for (int64_t flat = 0; flat < numel(out); ++flat) {
      const Ints o = unflatten(flat, out);
      Ints i(in_rank);
      for (int k = 0; k < in_rank; ++k) i[k] = in[k] == 1 ? 0 : o[rank - in_rank + k];
      ASSERT_EQ(expand.source(flat), flatten(i, in)) << "expand trial " << trial;
    }
    const Ints tile_in = random_sizes(rank);
    Ints tiled(rank);
    for (int k = 0; k < rank; ++k) tiled[k] = tile_in[k] * uniform(1, 3);
    const StridedMap tile = tile_map(tile_in, tiled);
    for (int64_t flat = 0; flat < numel(tiled); ++flat) {
      Ints i = unflatten(flat, tiled);
      for (int k = 0; k < rank; ++k) i[k] %= tile_in[k];
      ASSERT_EQ(tile.source(flat), flatten(i, tile_in)) << "tile trial " << trial;
    }
  }
}

TEST(CudaDataMovementIndex, SliceAxisClampsLikeNumpySlice) {
  const Ints values = {INT64_MIN, -9, -5, -4, -1, 0, 1, 2, 3, 4, 5, 9, INT64_MAX};
  const Ints steps = {INT64_MIN, -5, -2, -1, 1, 2, 3, INT64_MAX};
  int checked = 0;
  for (int64_t size : {0, 1, 4, 5})
    for (int64_t start : values)
      for (int64_t end : values)
        for (int64_t step : steps) {
          const SliceExtent want = numpy_slice(start, end, step, size);
          const SliceAxis got = slice_axis(start, end, step, size);
          ASSERT_EQ(got.count, want.count) << start << ":" << end << ":" << step << " of " << size;
          if (want.count > 0) {
            ASSERT_EQ(got.first, want.first) << start << ":" << end << ":" << step << " of " << size;
          }
          ++checked;
        }
  EXPECT_GT(checked, 1000);
}

// resolve_slice on int32 and int64 argument arrays gives the reference slice_view's base, sizes, strides.
TEST(CudaDataMovementIndex, ResolveSliceMatchesTheReferenceSliceView) {
  const KernelSpec spec{.op_type = "Slice", .node_name = "n"};
  for (int trial = 0; trial < 200; ++trial) {
    const int rank = static_cast<int>(uniform(1, 4));
    const Ints sizes = random_sizes(rank, 0, 6);
    Ints axes(rank);
    std::iota(axes.begin(), axes.end(), 0);
    std::shuffle(axes.begin(), axes.end(), rng());
    axes.resize(uniform(1, rank));
    Ints starts, ends, steps, signed_axes;
    for (int64_t a : axes) {
      starts.push_back(uniform(-8, 8));
      ends.push_back(uniform(-8, 8));
      steps.push_back(uniform(0, 1) ? uniform(1, 3) : -uniform(1, 3));
      signed_axes.push_back(uniform(0, 1) ? a : a - rank);
    }
    const reference::SliceView v = reference::slice_view(spec, sizes, starts, ends, signed_axes, steps);
    const std::vector<int32_t> starts32(starts.begin(), starts.end()), steps32(steps.begin(), steps.end());
    SliceArgs args;
    args.count = static_cast<int64_t>(axes.size());
    args.starts = starts32.data();
    args.starts_int64 = false;
    args.ends = ends.data();
    args.axes = signed_axes.data();
    args.steps = steps32.data();
    args.steps_int64 = false;
    StridedMap map;
    ASSERT_EQ(resolve_slice(rank, sizes.data(), v.sizes.data(), args, map), kSliceOk) << "trial " << trial;
    EXPECT_EQ(map.base, v.base);
    for (int k = 0; k < rank; ++k) {
      EXPECT_EQ(map.sizes[k], v.sizes[k]) << "trial " << trial << " dim " << k;
      EXPECT_EQ(map.strides[k], v.strides[k]) << "trial " << trial << " dim " << k;
    }
    // The slice's sizes disagreeing with the allocation is reported, not used.
    Ints wrong = v.sizes;
    wrong[0] += 1;
    EXPECT_EQ(resolve_slice(rank, sizes.data(), wrong.data(), args, map), kSliceSizeMismatch);
  }
}

TEST(CudaDataMovementIndex, ResolveSliceReportsBadArguments) {
  const Ints sizes = {4, 5}, expected = {4, 5};
  const Ints starts = {0, 0}, ends = {9, 9};
  StridedMap map;
  auto resolve = [&](const Ints& axes, const Ints& steps) {
    SliceArgs args;
    args.count = 2;
    args.starts = starts.data();
    args.ends = ends.data();
    args.axes = axes.data();
    args.steps = steps.data();
    return resolve_slice(2, sizes.data(), expected.data(), args, map);
  };
  EXPECT_EQ(resolve({0, 1}, {1, 1}), kSliceOk);
  EXPECT_EQ(resolve({0, 2}, {1, 1}), kSliceBadAxis);
  EXPECT_EQ(resolve({0, -3}, {1, 1}), kSliceBadAxis);
  EXPECT_EQ(resolve({1, -1}, {1, 1}), kSliceRepeatedAxis);
  EXPECT_EQ(resolve({0, 1}, {1, 0}), kSliceZeroStep);
}

PadGeometry geometry_of(const Ints& in, const Ints& out, PadMode mode) {
  PadGeometry g;
  g.rank = static_cast<int>(in.size());
  g.mode = mode;
  for (int k = 0; k < g.rank; ++k) {
    g.in[k] = in[k];
    g.out[k] = out[k];
  }
  row_major(g.rank, g.in, g.in_strides);
  return g;
}

const PadMode kModes[] = {PadMode::Constant, PadMode::Reflect, PadMode::Edge, PadMode::Wrap};

// A random Pad: input sizes, begin and end pads (negative crops), padded sizes.
struct RandomPad {
  Ints in, begins, ends, out;
};

RandomPad random_pad(int rank) {
  RandomPad p;
  p.in = random_sizes(rank, 1, 4);
  for (int k = 0; k < rank; ++k) {
    p.begins.push_back(uniform(-1, 5));
    p.ends.push_back(uniform(-1, 5));
    p.out.push_back(std::max<int64_t>(0, p.in[k] + p.begins[k] + p.ends[k]));
    p.ends[k] = p.out[k] - p.in[k] - p.begins[k];
  }
  return p;
}

TEST(CudaDataMovementIndex, PadSourceMatchesTheReferenceMapping) {
  for (int trial = 0; trial < 60; ++trial) {
    const RandomPad p = random_pad(static_cast<int>(uniform(1, 3)));
    for (PadMode mode : kModes) {
      const PadGeometry g = geometry_of(p.in, p.out, mode);
      reference::for_each_pad_source(p.in, p.out, p.begins, mode, [&](int64_t flat, int64_t source) {
        ASSERT_EQ(pad_source(flat, g, p.begins.data()), source) << "trial " << trial << " mode " << int(mode);
      });
    }
  }
}

TEST(CudaDataMovementIndex, ResolvePadBeginsReadsPadsOverAxes) {
  const PadGeometry g = geometry_of({2, 3, 4}, {2, 6, 3}, PadMode::Constant);
  int64_t begins[kMaxRank];
  // Over axes {-1, 1}: axis 2 gets begin 1 and end 2, so 4 + 1 + 2 = 7 elements, not the 3 allocated.
  const Ints pads = {1, -2, 2, 1};
  const Ints axes = {-1, 1};
  EXPECT_EQ(resolve_pad_begins(g, pads.data(), true, axes.data(), true, 2, begins), kPadSizeMismatch);
  const std::vector<int32_t> pads32 = {-2, 1, 1, 2};  // axis 2: begin -2 end 1 -> 3; axis 1: begin 1 end 2 -> 6
  ASSERT_EQ(resolve_pad_begins(g, pads32.data(), false, axes.data(), true, 2, begins), kPadOk);
  EXPECT_EQ(begins[0], 0);
  EXPECT_EQ(begins[1], 1);
  EXPECT_EQ(begins[2], -2);
  const Ints bad_axes = {3, 1};
  EXPECT_EQ(resolve_pad_begins(g, pads32.data(), false, bad_axes.data(), true, 2, begins), kPadBadAxis);
  const Ints all = {0, 1, 0, 0, 2, -1};  // no axes: every axis in order
  EXPECT_EQ(resolve_pad_begins(g, all.data(), true, nullptr, true, 3, begins), kPadOk);
}

// PadGrad's per-element gather sums exactly what the reference's scatter adds, in the same order.
TEST(CudaDataMovementIndex, PadGradSumIsTheReferenceScatterBitForBit) {
  std::uniform_real_distribution<float> real(-2, 2);
  for (int trial = 0; trial < 60; ++trial) {
    const RandomPad p = random_pad(static_cast<int>(uniform(1, 3)));
    for (PadMode mode : kModes) {
      std::vector<float> dy(numel(p.out));
      for (float& v : dy) v = real(rng());
      std::vector<float> want(numel(p.in), 0.0f);
      reference::for_each_pad_source(p.in, p.out, p.begins, mode, [&](int64_t flat, int64_t source) {
        if (source >= 0) want[source] += dy[flat];
      });
      const PadGeometry g = geometry_of(p.in, p.out, mode);
      for (int64_t i = 0; i < numel(p.in); ++i)
        ASSERT_EQ(pad_grad_sum(i, g, p.begins.data(), dy.data()), want[i])
            << "trial " << trial << " mode " << int(mode);
    }
  }
}

TEST(CudaDataMovementIndex, GatherSourceHandlesNegativeAndBadIndices) {
  for (int64_t v = -7; v <= 7; ++v) EXPECT_EQ(gather_row(v, 5), v < -5 || v >= 5 ? -1 : (v + 5) % 5) << v;
  EXPECT_EQ(gather_row(0, 0), -1);
  EXPECT_EQ(gather_row(INT64_MIN, 3), -1);
  const GatherGeometry g{.outer = 2, .n = 5, .inner = 3, .count = 4};
  const Ints indices = {4, -1, 0, 2};  // -1 is row 4, repeated
  for (int64_t flat = 0; flat < g.outer * g.count * g.inner; ++flat) {
    const Ints o = unflatten(flat, {g.outer, g.count, g.inner});
    const int64_t row = indices[o[1]] < 0 ? indices[o[1]] + g.n : indices[o[1]];
    EXPECT_EQ(gather_source(flat, g, indices.data(), true), flatten({o[0], row, o[2]}, {g.outer, g.n, g.inner}));
  }
  const std::vector<int32_t> bad = {5, -6, 0, 1};
  EXPECT_EQ(gather_source(0, g, bad.data(), false), -1);
  EXPECT_EQ(gather_source(3, g, bad.data(), false), -1);
  EXPECT_EQ(gather_source(6, g, bad.data(), false), 0);
}

// Emulates cudaMemcpy2DAsync on the host.
void apply(const BlockCopy& b, const int* src, int* dst) {
  if (b.width == 0) return;  // an empty part: nothing to copy, and its buffer may be null
  for (int64_t r = 0; r < b.rows; ++r)
    std::memcpy(dst + b.dst_offset + r * b.dst_pitch, src + b.src_offset + r * b.src_pitch, b.width * sizeof(int));
}

TEST(CudaDataMovementIndex, ConcatAndSplitBlocksPlaceEveryPart) {
  const int64_t outer = 3, inner = 2;
  const Ints axis_sizes = {2, 0, 3, 1};
  const int64_t total = 6;
  std::vector<std::vector<int>> parts;
  int next = 0;
  for (int64_t s : axis_sizes) {
    parts.emplace_back(outer * s * inner);
    for (int& v : parts.back()) v = next++;
  }
  std::vector<int> want(outer * total * inner);  // naive concat: out[o, offset + a, k] = part[o, a, k]
  int64_t offset = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t a = 0; a < axis_sizes[p]; ++a)
        for (int64_t k = 0; k < inner; ++k)
          want[(o * total + offset + a) * inner + k] = parts[p][(o * axis_sizes[p] + a) * inner + k];
    offset += axis_sizes[p];
  }
  std::vector<int> got(want.size(), -1);
  const std::vector<BlockCopy> concat = concat_blocks(outer, inner, axis_sizes);
  for (size_t p = 0; p < parts.size(); ++p) apply(concat[p], parts[p].data(), got.data());
  EXPECT_EQ(got, want);
  const std::vector<BlockCopy> split = split_blocks(outer, inner, axis_sizes);
  for (size_t p = 0; p < parts.size(); ++p) {
    std::vector<int> back(parts[p].size(), -1);
    apply(split[p], want.data(), back.data());
    EXPECT_EQ(back, parts[p]) << "part " << p;
  }
}

// Emulates what copy_block enqueues for `kind`: one 1-D copy, one 2-D copy, or one 1-D copy per row.
void apply_as_enqueued(const BlockCopy& b, BlockCopyKind kind, const int* src, int* dst) {
  if (kind == BlockCopyKind::Empty) return;
  if (kind == BlockCopyKind::Flat) {
    std::memcpy(dst + b.dst_offset, src + b.src_offset, b.rows * b.width * sizeof(int));
    return;
  }
  apply(b, src, dst);  // Pitched and RowByRow move the same rows
}

// cudaMemcpy2DAsync refuses pitches over 2^31 - 1 bytes: a Concat or Split along axis 0 (one row whose
// pitch is the whole tensor) or with rows over 2 GiB apart must take the 1-D copies, which move the same
// elements as the 2-D one would.
TEST(CudaDataMovementIndex, BlockCopiesAvoidPitchesCudaRefuses) {
  // axis 0 of a 6 GiB float32 tensor: one row each, pitch 6 GiB -> a single 1-D copy
  const int64_t g = int64_t{1} << 30;
  for (const BlockCopy& b : concat_blocks(1, 1, {g / 2, g, g / 2}))
    EXPECT_EQ(block_copy_kind(b, 4), BlockCopyKind::Flat);
  // two rows of 4 GiB (float32) in the output: per-row copies; the same small shape fits the 2-D call
  for (const BlockCopy& b : concat_blocks(2, 1, {g / 2, g / 2}))
    EXPECT_EQ(block_copy_kind(b, 4), BlockCopyKind::RowByRow);
  for (const BlockCopy& b : split_blocks(2, 1, {g / 2, g / 2}))
    EXPECT_EQ(block_copy_kind(b, 4), BlockCopyKind::RowByRow);
  for (const BlockCopy& b : concat_blocks(2, 1, {3, 5})) EXPECT_EQ(block_copy_kind(b, 4), BlockCopyKind::Pitched);
  // exactly at the limit still fits, one byte more does not
  EXPECT_EQ(block_copy_kind({2, 1, 1, kMaxCopyPitchBytes, 0, 0}, 1), BlockCopyKind::Pitched);
  EXPECT_EQ(block_copy_kind({2, 1, 1, kMaxCopyPitchBytes + 1, 0, 0}, 1), BlockCopyKind::RowByRow);
  EXPECT_EQ(block_copy_kind({0, 4, 4, 8, 0, 0}, 4), BlockCopyKind::Empty);
  EXPECT_EQ(block_copy_kind({3, 0, 0, 8, 0, 4}, 4), BlockCopyKind::Empty);
  // a part that is the whole of the inner dims of its rows on both sides is contiguous: one 1-D copy
  EXPECT_EQ(block_copy_kind({3, 4, 4, 4, 0, 0}, 4), BlockCopyKind::Flat);

  // Whatever the kind, the enqueued copies place every part where the naive concat puts it.
  const int64_t outer = 3, inner = 2;
  for (const Ints& axis_sizes : {Ints{2, 0, 3, 1}, Ints{4}, Ints{1, 1}}) {
    int64_t total = 0;
    for (int64_t s : axis_sizes) total += s;
    for (int64_t rows : {int64_t{1}, outer}) {
      std::vector<std::vector<int>> parts;
      int next = 0;
      for (int64_t s : axis_sizes) {
        parts.emplace_back(rows * s * inner);
        for (int& v : parts.back()) v = next++;
      }
      std::vector<int> want(rows * total * inner, -1), got(want.size(), -1);
      const std::vector<BlockCopy> blocks = concat_blocks(rows, inner, axis_sizes);
      for (size_t p = 0; p < parts.size(); ++p) {
        apply(blocks[p], parts[p].data(), want.data());
        apply_as_enqueued(blocks[p], block_copy_kind(blocks[p], sizeof(int)), parts[p].data(), got.data());
      }
      EXPECT_EQ(got, want) << ::testing::PrintToString(axis_sizes) << " rows " << rows;
    }
  }
}

// --- registration (no device needed): every data-movement op has a "cuda" kernel for the dtypes the
// reference kernel covers, or, with CUDA compiled out, none at all ---

TEST(CudaDataMovementRegistry, CoversTheReferenceDTypes) {
  const std::vector<std::pair<std::string, std::string>> ops = {{"", "Shape"},
                                                                {"", "Size"},
                                                                {"", "Constant"},
                                                                {"", "ConstantOfShape"},
                                                                {"", "Range"},
                                                                {"", "Reshape"},
                                                                {"", "Flatten"},
                                                                {"", "Squeeze"},
                                                                {"", "Unsqueeze"},
                                                                {"", "Identity"},
                                                                {"", "Concat"},
                                                                {"", "Split"},
                                                                {"", "Slice"},
                                                                {"", "Transpose"},
                                                                {"", "Expand"},
                                                                {"", "Tile"},
                                                                {"", "Gather"},
                                                                {"", "Pad"},
                                                                {"", "Resize"},
                                                                {"", "Upsample"},
                                                                {"", "DepthToSpace"},
                                                                {"", "SpaceToDepth"},
                                                                {"ai.onnxtrain", "ResizeGrad"},
                                                                {"ai.onnxtrain", "SliceGrad"},
                                                                {"ai.onnxtrain", "GatherGrad"},
                                                                {"ai.onnxtrain", "PadGrad"}};
  expect_cuda_kernels_cover(ops);
}

// --- GPU: every CUDA kernel against the reference kernel ---

Tensor scalar(DType dtype, double v) {
  Tensor t(dtype, {});
  if (dtype == DType::Float32) t.data<float>()[0] = static_cast<float>(v);
  if (dtype == DType::Float64) t.data<double>()[0] = v;
  if (dtype == DType::Int32) t.data<int32_t>()[0] = static_cast<int32_t>(v);
  if (dtype == DType::Int64) t.data<int64_t>()[0] = static_cast<int64_t>(v);
  return t;
}

std::vector<Case> gpu_cases() {
  std::vector<Case> cases;
  const DType f = DType::Float32;
  const Tensor x = random_tensor(f, {3, 4, 5});
  const Tensor h = random_tensor(DType::Float16, {3, 4, 5});
  const Tensor b = random_tensor(DType::Bool, {3, 4, 5});
  const Tensor i64 = random_tensor(DType::Int64, {3, 4, 5});
  // shapes and constants
  cases.push_back({"Shape", 15, {{"start", int64_t{1}}}, {x}, {{DType::Int64, {2}}}});
  cases.push_back({"Size", 13, {}, {b}, {{DType::Int64, {}}}});
  cases.push_back({"Constant", 13, {{"value", random_tensor(DType::Float64, {2, 3})}}, {}, {{DType::Float64, {2, 3}}}});
  cases.push_back({"Constant", 13, {{"value_ints", Ints{4, -2, 7}}}, {}, {{DType::Int64, {3}}}});
  cases.push_back(
      {"ConstantOfShape", 9, {{"value", ints({-5}, DType::Int32)}}, {ints({2, 3})}, {{DType::Int32, {2, 3}}}});
  cases.push_back({"ConstantOfShape", 9, {}, {ints({4})}, {{f, {4}}}});
  cases.push_back({"Range", 11, {}, {scalar(f, 1.5), scalar(f, 9), scalar(f, 0.7)}, {{f, {11}}}});
  cases.push_back({"Range",
                   11,
                   {},
                   {scalar(DType::Int64, 10), scalar(DType::Int64, -3), scalar(DType::Int64, -4)},
                   {{DType::Int64, {4}}}});
  // i·0.1 is inexact in double: an FMA-contracted start + i·delta would round differently from the reference.
  cases.push_back({"Range",
                   11,
                   {},
                   {scalar(DType::Float64, 0.25), scalar(DType::Float64, 3.0), scalar(DType::Float64, 0.1)},
                   {{DType::Float64, {28}}}});
  // byte copies, concat, split
  cases.push_back({"Reshape", 14, {}, {x, ints({-1, 10})}, {{f, {6, 10}}}});
  cases.push_back({"Flatten", 13, {{"axis", int64_t{2}}}, {h}, {{DType::Float16, {12, 5}}}});
  cases.push_back({"Identity", 13, {}, {b}, {{DType::Bool, {3, 4, 5}}}});
  cases.push_back({"Concat",
                   13,
                   {{"axis", int64_t{1}}},
                   {x, random_tensor(f, {3, 2, 5}), random_tensor(f, {3, 0, 5})},
                   {{f, {3, 6, 5}}}});
  cases.push_back(
      {"Concat", 13, {{"axis", int64_t{-1}}}, {b, random_tensor(DType::Bool, {3, 4, 1})}, {{DType::Bool, {3, 4, 6}}}});
  cases.push_back({"Split",
                   13,
                   {{"axis", int64_t{2}}},
                   {i64, ints({2, 3})},
                   {{DType::Int64, {3, 4, 2}}, {DType::Int64, {3, 4, 3}}}});
  cases.push_back({"Split",
                   11,
                   {{"axis", int64_t{0}}, {"split", Ints{1, 2}}},
                   {h},
                   {{DType::Float16, {1, 4, 5}}, {DType::Float16, {2, 4, 5}}}});
  // strided copies
  cases.push_back({"Transpose", 13, {{"perm", Ints{2, 0, 1}}}, {x}, {{f, {5, 3, 4}}}});
  cases.push_back({"Transpose", 13, {}, {b}, {{DType::Bool, {5, 4, 3}}}});
  cases.push_back({"Expand", 13, {}, {random_tensor(f, {4, 1}), ints({2, 1, 3})}, {{f, {2, 4, 3}}}});
  cases.push_back({"Tile", 13, {}, {random_tensor(DType::Int32, {2, 3}), ints({3, 2})}, {{DType::Int32, {6, 6}}}});
  // slice, gather, pad and their gradients
  cases.push_back({"Slice",
                   13,
                   {},
                   {x, ints({-1, 1}, DType::Int32), ints({INT64_MIN, 5}), ints({0, 2}), ints({-2, 2})},
                   {{f, {2, 4, 2}}}});
  cases.push_back(
      {"Slice", 1, {{"starts", Ints{1}}, {"ends", Ints{3}}, {"axes", Ints{1}}}, {h}, {{DType::Float16, {3, 2, 5}}}});
  cases.push_back(
      {"SliceGrad",
       1,
       {},
       {random_tensor(f, {2, 4, 2}), ints({3, 4, 5}), ints({-1, 1}), ints({INT64_MIN, 5}), ints({0, 2}), ints({-2, 2})},
       {{f, {3, 4, 5}}},
       "ai.onnxtrain"});
  cases.push_back({"Gather", 13, {{"axis", int64_t{1}}}, {x, ints({3, -4, 0, 3, -1}, DType::Int32)}, {{f, {3, 5, 5}}}});
  cases.push_back({"Gather", 13, {}, {b, ints({2, 0})}, {{DType::Bool, {2, 4, 5}}}});
  cases.push_back({"GatherGrad",
                   1,
                   {{"axis", int64_t{1}}},
                   {random_tensor(DType::Float64, {3, 5, 5}), ints({3, 4, 5}), ints({3, -4, 0, 3, -1}, DType::Int32)},
                   {{DType::Float64, {3, 4, 5}}},
                   "ai.onnxtrain"});
  for (const char* mode : {"constant", "reflect", "edge", "wrap"}) {
    cases.push_back(
        {"Pad", 13, {{"mode", std::string(mode)}}, {x, ints({0, 2, -1, 1, 3, 2}), scalar(f, 0.5)}, {{f, {4, 9, 6}}}});
    cases.push_back({"PadGrad",
                     1,
                     {{"mode", std::string(mode)}},
                     {random_tensor(f, {4, 9, 6}), ints({3, 4, 5}), ints({0, 2, -1, 1, 3, 2})},
                     {{f, {3, 4, 5}}},
                     "ai.onnxtrain"});
  }
  cases.push_back(
      {"Pad", 18, {}, {i64, ints({1, 2}, DType::Int32), Tensor(), ints({-1})}, {{DType::Int64, {3, 4, 8}}}});
  cases.push_back({"Pad", 2, {{"pads", Ints{1, 0, 0, 0, 1, 1}}, {"value", 2.5}}, {x}, {{f, {4, 5, 6}}}});
  // DepthToSpace and SpaceToDepth (strided copies); Resize and ResizeGrad (the shared per-element math over
  // tables made on the host) in cubic, linear with extrapolation, and legacy nearest.
  cases.push_back({"DepthToSpace",
                   13,
                   {{"blocksize", int64_t{2}}, {"mode", std::string("CRD")}},
                   {random_tensor(f, {2, 8, 3, 2})},
                   {{f, {2, 2, 6, 4}}}});
  cases.push_back({"SpaceToDepth",
                   13,
                   {{"blocksize", int64_t{2}}},
                   {random_tensor(DType::Int64, {1, 3, 4, 6})},
                   {{DType::Int64, {1, 12, 2, 3}}}});
  Tensor scales(f, {4});
  for (int k = 0; k < 4; ++k) scales.data<float>()[k] = k < 2 ? 1.0f : 1.5f + 0.25f * static_cast<float>(k);
  const Attributes cubic{{"mode", std::string("cubic")}, {"exclude_outside", int64_t{1}}};
  cases.push_back({"Resize", 13, cubic, {random_tensor(f, {2, 3, 4, 5}), Tensor(), scales}, {{f, {2, 3, 8, 11}}}});
  cases.push_back({"ResizeGrad",
                   1,
                   cubic,
                   {random_tensor(f, {2, 3, 8, 11}), ints({2, 3, 4, 5}), Tensor(), scales},
                   {{f, {2, 3, 4, 5}}},
                   "ai.onnxtrain"});
  Tensor roi(f, {8});
  const float box[8] = {0, 0, -0.25f, 0.1f, 1, 1, 1.2f, 0.9f};
  std::copy(box, box + 8, roi.data<float>().begin());
  const Attributes crop{{"mode", std::string("linear")},
                        {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                        {"extrapolation_value", -1.5}};
  cases.push_back({"Resize",
                   13,
                   crop,
                   {random_tensor(DType::Float64, {1, 2, 5, 4}), roi, Tensor(), ints({1, 2, 7, 3})},
                   {{DType::Float64, {1, 2, 7, 3}}}});
  cases.push_back({"ResizeGrad",
                   1,
                   crop,
                   {random_tensor(DType::Float64, {1, 2, 7, 3}), ints({1, 2, 5, 4}), roi, Tensor(), ints({1, 2, 7, 3})},
                   {{DType::Float64, {1, 2, 5, 4}}},
                   "ai.onnxtrain"});
  cases.push_back({"Upsample", 9, {}, {random_tensor(f, {1, 2, 3, 2}), scales}, {{f, {1, 2, 6, 4}}}});
  return cases;
}

TEST(CudaDataMovementKernels, MatchTheReferenceBitForBit) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  expect_cases_match_the_reference(gpu_cases(), /*host_input_run=*/true);
}

// An out-of-range index cannot throw from device code: the next run of the same kernel reports it.
TEST(CudaDataMovementKernels, GatherReportsABadIndexAtTheNextRun) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  cuda::DeviceStream stream(0);
  const Case c{"Gather", 13, {}, {random_tensor(DType::Float32, {4, 2}), ints({1, 4})}, {{DType::Float32, {2, 2}}}};
  const KernelSpec spec = spec_of(c);
  std::unique_ptr<Kernel> kernel =
      KernelRegistry::builtin().find("", "Gather", DeviceKind::Cuda, DType::Float32, "cuda")->prepare(spec);
  const std::vector<Tensor> first = run_on_gpu(c, *kernel, stream);  // enqueues, raises the flag
  EXPECT_EQ(first[0].data<float>()[2], 0.0f);                        // the bad row is zero-filled
  try {
    run_on_gpu(c, *kernel, stream);
    FAIL() << "expected an Error for index 4 of an axis of size 4";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index out of range"), std::string::npos) << e.what();
  }
}

// Prepare-time checks of the kernels without an error flag touch no device, so they run wherever CUDA is
// compiled in: each bad spec fails with an Error naming what is wrong, like the reference's.
TEST(CudaDataMovementKernels, PrepareRejectsWhatTheReferenceRejects) {
  if (!ONNXTRAIN_WITH_CUDA) GTEST_SKIP() << "CUDA is compiled out: there are no CUDA kernels to prepare";
  const DType f = DType::Float32;
  const Tensor x = random_tensor(f, {2, 3});
  const std::vector<std::pair<Case, std::string>> bad = {
      {{"Transpose", 13, {{"perm", Ints{0, 0}}}, {x}, {{f, {2, 3}}}}, "is not a permutation"},
      {{"Transpose", 13, {}, {random_tensor(f, Ints(9, 1))}, {{f, Ints(9, 1)}}}, "supports up to 8"},
      {{"Concat", 13, {{"axis", int64_t{0}}}, {x, random_tensor(f, {2, 2})}, {{f, {4, 3}}}}, "outside axis 0"},
      {{"Concat", 13, {}, {x}, {{f, {2, 3}}}}, "axis attribute is required"},
      {{"Split", 13, {{"axis", int64_t{1}}}, {x}, {{f, {2, 1}}, {f, {2, 1}}}}, "the outputs take 2"},
      {{"Expand", 13, {}, {x, ints({3, 3})}, {{f, {3, 3}}}}, "cannot expand"},
      {{"Tile", 13, {}, {x, ints({1, 2})}, {{f, {2, 5}}}}, "whole repeats"},
      {{"Reshape", 14, {}, {x, ints({5})}, {{f, {5}}}}, "different element counts"},
      {{"Flatten", 13, {{"axis", int64_t{3}}}, {x}, {{f, {6, 1}}}}, "out of range"},
      {{"Shape", 15, {}, {x}, {{f, {2}}}}, "expected int64"},
      {{"Constant", 13, {}, {}, {{f, {}}}}, "exactly one value attribute"},
  };
  for (const auto& [c, message] : bad) {
    const KernelSpec spec = spec_of(c);
    const KernelEntry* entry = KernelRegistry::builtin().find("", c.op, DeviceKind::Cuda, kernel_dtype(spec), "cuda");
    ASSERT_NE(entry, nullptr) << c.op;
    try {
      entry->prepare(spec);
      ADD_FAILURE() << c.op << ": expected an Error containing '" << message << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << c.op << ": " << e.what();
    }
  }
}

}  // namespace
