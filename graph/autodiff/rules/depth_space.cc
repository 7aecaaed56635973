// DepthToSpace and SpaceToDepth only move elements: y is x viewed as 6-D (sizes V) and transposed by P
// (graph/depth_space_view.h). So dx = Reshape(Transpose(Reshape(dy, V permuted by P), P⁻¹), shape(x)),
// with ONNX ops; the batch dim stays symbolic (Reshape's 0 copies it), the others must be static.
#include "graph/autodiff/rules/rules.h"
#include "graph/depth_space_view.h"

namespace onnxtrain::gradient_rules {

void depth_space_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  const Node& node = ctx.node();
  const Shape& x = ctx.shape(ctx.input(0));
  if (!x.rank_known || x.rank() != 4 || !x.dims[1].is_static() || !x.dims[2].is_static() || !x.dims[3].is_static())
    ctx.fail("needs the input's channels, height and width static, got shape " + x.to_string());
  const DepthSpaceView view =
      depth_space_view(node.op_type == "DepthToSpace", node.attr_string("mode", "DCR"),
                       {1, x.dims[1].value(), x.dims[2].value(), x.dims[3].value()}, node.attr_int("blocksize", 0));
  if (!view.error.empty()) ctx.fail(view.error);
  std::vector<int64_t> permuted_sizes(6), inverse(6);
  for (int k = 0; k < 6; ++k) {
    permuted_sizes[k] = view.sizes[view.perm[k]];
    inverse[view.perm[k]] = k;
  }
  permuted_sizes[0] = 0;  // the batch, copied from dy
  const ValueId six_d = ctx.emit("Reshape", {ctx.output_grad(0), ctx.int64s(permuted_sizes)});
  const ValueId back = ctx.emit("Transpose", {six_d}, {{"perm", inverse}});
  ctx.add_input_grad(0, ctx.emit("Reshape", {back, ctx.shape_of(ctx.input(0))}));
}

}  // namespace onnxtrain::gradient_rules
