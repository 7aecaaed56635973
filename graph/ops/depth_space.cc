// DepthToSpace (opset 1, 11: mode DCR or CRD, 13) and SpaceToDepth (1, 13): a 4-D tensor's channels moved
// into blocksize x blocksize blocks of pixels and back (graph/depth_space_view.h). PixelShuffle and
// PixelUnshuffle export as these.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;
using shape_ops::no_flops;

// `d` divided by `by`: unknown when it is not static, a failure when it does not divide.
Dim divided(const InferContext& ctx, const Dim& d, int64_t by, const char* what) {
  if (!d.is_static()) return d.divide_exact(Dim(by));
  if (d.value() % by != 0)
    fail_op(ctx, std::string(what) + " " + std::to_string(d.value()) + " is not a multiple of " + std::to_string(by));
  return d.value() / by;
}

void infer_depth_space(InferContext& ctx) {
  const Node& node = ctx.node();
  const bool to_space = node.op_type == "DepthToSpace";
  const int64_t b = node.attr_int("blocksize", 0);
  if (b <= 0) fail_op(ctx, "the blocksize attribute must be given and positive, got " + std::to_string(b));
  const std::string mode = node.attr_string("mode", "DCR");
  if (to_space && mode != "DCR" && mode != "CRD") fail_op(ctx, "unknown mode '" + mode + "' (expected DCR or CRD)");
  const Shape& in = ctx.input_shape(0);
  if (!in.rank_known) return ctx.set_output(0, ctx.input_dtype(0), Shape(std::vector<Dim>(4)));
  if (in.rank() != 4) fail_op(ctx, "the input must be 4-D (N, C, H, W), got shape " + in.to_string());
  Shape out = in;
  if (to_space) {
    out.dims[1] = divided(ctx, in.dims[1], b * b, "the channel count");
    out.dims[2] = in.dims[2] * Dim(b);
    out.dims[3] = in.dims[3] * Dim(b);
  } else {
    out.dims[1] = in.dims[1] * Dim(b * b);
    out.dims[2] = divided(ctx, in.dims[2], b, "the height");
    out.dims[3] = divided(ctx, in.dims[3], b, "the width");
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
}

}  // namespace

void register_depth_space_ops(OpRegistry& registry) {
  registry.add({.op_type = "DepthToSpace", .infer = infer_depth_space, .cost = no_flops});
  registry.add({.op_type = "SpaceToDepth", .infer = infer_depth_space, .cost = no_flops});
}

}  // namespace onnxtrain
