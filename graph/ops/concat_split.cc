// Concat (opset 1, 4: axis required, 11: negative axis, 13) and Split (opset 1/2 and 11: `split`
// attribute, 13: `split` input, 18: `num_outputs` with a smaller last chunk). Concatenated symbolic dims
// add up (N + N = 2*N); known vectors concatenate and split.
#include <climits>
#include <cstring>

#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;
using namespace shape_ops;

int64_t concat_axis_attribute(const Node& node) {
  return node.attr_int("axis", 1);  // opset 1 defaulted to 1; from opset 4 it is required
}

void infer_concat(InferContext& ctx) {
  if (ctx.opset() >= 4 && !ctx.node().has_attribute("axis")) fail_op(ctx, "the axis attribute is required");
  DType dtype = ctx.input_dtype(0);
  const Shape* reference = nullptr;
  for (size_t i = 0; i < ctx.input_count(); ++i) {
    if (!ctx.has_input(i)) fail_op(ctx, "input " + std::to_string(i) + " is missing");
    require_same_dtype(ctx, i);
    if (!reference && ctx.input_shape(i).rank_known) reference = &ctx.input_shape(i);
  }
  if (!reference) {
    ctx.set_output(0, dtype, Shape::unknown_rank());
    return;
  }
  const int64_t rank = reference->rank();
  if (rank == 0) fail_op(ctx, "cannot concatenate scalars (inputs must have rank >= 1)");
  const int64_t axis = checked_axis(ctx, concat_axis_attribute(ctx.node()), rank);
  std::vector<Dim> out = reference->dims;
  Dim axis_sum(0);
  for (size_t i = 0; i < ctx.input_count(); ++i) {
    const Shape& s = ctx.input_shape(i);
    if (!s.rank_known) {
      axis_sum = Dim::unknown();
      continue;
    }
    if (s.rank() != rank) {
      fail_op(ctx, "input " + std::to_string(i) + " has rank " + std::to_string(s.rank()) + ", expected " +
                       std::to_string(rank) + " (shapes " + reference->to_string() + " and " + s.to_string() + ")");
    }
    for (int64_t k = 0; k < rank; ++k) {
      if (k == axis) continue;
      const Dim& d = s.dims[k];
      if (out[k].is_static() && d.is_static() && out[k] != d) {
        fail_op(ctx, "input " + std::to_string(i) + " has shape " + s.to_string() + ", which differs from " +
                         reference->to_string() + " in dim " + std::to_string(k) + " (only axis " +
                         std::to_string(axis) + " may differ)");
      }
      if (!out[k].is_static() && !d.is_unknown()) out[k] = d;
    }
    axis_sum = axis_sum + s.dims[axis];
  }
  out[axis] = axis_sum;
  ctx.set_output(0, dtype, Shape(out));

  if (rank != 1) return;
  std::vector<Dim> joined;
  for (size_t i = 0; i < ctx.input_count(); ++i) {
    auto known = ctx.input_known(i);
    if (!known) return;
    joined.insert(joined.end(), known->begin(), known->end());
  }
  set_known_output(ctx, 0, dtype, joined);
}

std::vector<Tensor> fold_concat(const FoldContext& ctx) {
  const Tensor& first = ctx.inputs[0];
  auto axis = normalize_axis(concat_axis_attribute(ctx.node), first.rank());
  if (!axis) fail_fold(ctx, "axis is out of range for rank " + std::to_string(first.rank()));
  std::vector<int64_t> sizes = first.sizes();
  sizes[*axis] = 0;
  for (const Tensor& t : ctx.inputs) sizes[*axis] += t.sizes()[*axis];
  int64_t outer = 1;
  for (int64_t k = 0; k < *axis; ++k) outer *= sizes[k];
  Tensor out(first.dtype(), sizes);
  if (out.numel() == 0) return {out};
  std::byte* dst = out.raw();
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor& t : ctx.inputs) {
      size_t chunk = t.nbytes() / static_cast<size_t>(outer);
      if (chunk) std::memcpy(dst, t.raw() + o * chunk, chunk);
      dst += chunk;
    }
  }
  return {out};
}

constexpr int kSplitInputSince = 13;
constexpr int kNumOutputsSince = 18;

// Static chunk sizes of an even split; nullopt with a reason when it cannot be split.
std::optional<std::vector<int64_t>> even_split(int64_t size, int64_t parts, bool allow_smaller_last) {
  if (size % parts == 0) return std::vector<int64_t>(parts, size / parts);
  int64_t chunk = (size + parts - 1) / parts;
  if (!allow_smaller_last || chunk * (parts - 1) >= size) return std::nullopt;
  std::vector<int64_t> sizes(parts, chunk);
  sizes.back() = size - chunk * (parts - 1);
  return sizes;
}

void infer_split(InferContext& ctx) {
  const Node& node = ctx.node();
  const Shape& in = ctx.input_shape(0);
  DType dtype = ctx.input_dtype(0);
  const auto parts = static_cast<int64_t>(ctx.output_count());
  IntList split = read_int_list(ctx, "split", 1, kSplitInputSince);
  if (ctx.opset() >= kNumOutputsSince && node.has_attribute("num_outputs")) {
    if (split.given) fail_op(ctx, "give either the split input or the num_outputs attribute, not both");
    if (node.attr_int("num_outputs", 0) != parts) {
      fail_op(ctx, "num_outputs is " + std::to_string(node.attr_int("num_outputs", 0)) + " but the node has " +
                       std::to_string(parts) + " outputs");
    }
  }
  if (!in.rank_known) {
    for (int64_t i = 0; i < parts; ++i) ctx.set_output(i, dtype, Shape::unknown_rank());
    return;
  }
  const int64_t axis = checked_axis(ctx, node.attr_int("axis", 0), in.rank());
  const Dim& size = in.dims[axis];
  std::vector<Dim> chunks(parts);  // unknown unless found below
  if (split.values) {
    const auto& values = *split.values;
    if (static_cast<int64_t>(values.size()) != parts) {
      fail_op(ctx, "split " + ints_to_string(values) + " has " + std::to_string(values.size()) +
                       " entries but the node has " + std::to_string(parts) + " outputs");
    }
    int64_t sum = 0;
    for (int64_t v : values) {
      if (v < 0) fail_op(ctx, "split " + ints_to_string(values) + " has a negative size");
      sum += v;
    }
    if (size.is_static() && sum != size.value()) {
      fail_op(ctx, "split " + ints_to_string(values) + " sums to " + std::to_string(sum) + " but axis " +
                       std::to_string(axis) + " has size " + std::to_string(size.value()) + " (input shape " +
                       in.to_string() + ")");
    }
    for (int64_t i = 0; i < parts; ++i) chunks[i] = values[i];
  } else if (!split.given && size.is_static()) {
    auto sizes = even_split(size.value(), parts, ctx.opset() >= kNumOutputsSince);
    if (!sizes) {
      fail_op(ctx, "axis " + std::to_string(axis) + " of size " + std::to_string(size.value()) +
                       " cannot be split into " + std::to_string(parts) + " outputs" +
                       (ctx.opset() >= kNumOutputsSince ? "" : " of equal size"));
    }
    for (int64_t i = 0; i < parts; ++i) chunks[i] = (*sizes)[i];
  } else if (!split.given) {
    Dim chunk = size.divide_exact(Dim(parts));
    for (Dim& d : chunks) d = chunk;
  }
  for (int64_t i = 0; i < parts; ++i) {
    Shape out = in;
    out.dims[axis] = chunks[i];
    ctx.set_output(i, dtype, out);
  }

  auto known = ctx.input_known(0);
  if (!known || in.rank() != 1) return;
  size_t offset = 0;
  for (int64_t i = 0; i < parts; ++i) {
    if (!chunks[i].is_static() || offset + static_cast<size_t>(chunks[i].value()) > known->size()) return;
    auto begin = known->begin() + static_cast<int64_t>(offset);
    set_known_output(ctx, i, dtype, std::vector<Dim>(begin, begin + chunks[i].value()));
    offset += chunks[i].value();
  }
}

std::vector<Tensor> fold_split(const FoldContext& ctx) {
  const Tensor& data = ctx.inputs[0];
  auto axis = normalize_axis(ctx.node.attr_int("axis", 0), data.rank());
  if (!axis) fail_fold(ctx, "axis is out of range for rank " + std::to_string(data.rank()));
  const auto parts = static_cast<int64_t>(ctx.node.outputs.size());
  const int64_t size = data.sizes()[*axis];
  auto sizes = fold_int_list(ctx, "split", 1, kSplitInputSince);
  if (!sizes) sizes = even_split(size, parts, ctx.node.opset >= kNumOutputsSince);
  int64_t total = 0;
  for (int64_t chunk : sizes.value_or(std::vector<int64_t>{})) total += chunk;
  if (!sizes || static_cast<int64_t>(sizes->size()) != parts || total != size) {
    fail_fold(ctx,
              "cannot split an axis of size " + std::to_string(size) + " into " + std::to_string(parts) + " outputs");
  }
  std::vector<int64_t> strides = row_major_strides(data.sizes());
  std::vector<Tensor> outputs;
  int64_t start = 0;
  for (int64_t chunk : *sizes) {
    std::vector<int64_t> out_sizes = data.sizes();
    out_sizes[*axis] = chunk;
    outputs.push_back(strided_copy(data, out_sizes, start * strides[*axis], strides));
    start += chunk;
  }
  return outputs;
}

}  // namespace

void register_concat_split_ops(OpRegistry& registry) {
  registry.add({.op_type = "Concat",
                .max_inputs = -1,
                .input_kinds = {InputKind::Data},
                .infer = infer_concat,
                .cost = no_flops,
                .fold = fold_concat});
  registry.add({.op_type = "Split",
                .max_inputs = 2,
                .max_outputs = INT_MAX,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_split,
                .cost = no_flops,
                .fold = fold_split});
}

}  // namespace onnxtrain
