// Concat: y = [x_0, x_1, ...] along `axis`, so dy splits back into pieces of the inputs' sizes along the
// axis: dx_0, dx_1, ... = Split(dy, sizes). Sizes that are not static are read at run time from Shape(x_i).
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void concat_gradient(GradientContext& ctx) {
  const size_t n = ctx.node().inputs.size();
  int64_t rank = -1;
  for (size_t i = 0; i < n && rank < 0; ++i)
    if (ctx.shape(ctx.input(i)).rank_known) rank = ctx.shape(ctx.input(i)).rank();
  int64_t axis = ctx.node().attr_int("axis", 1);  // opset 1 defaulted to 1
  if (axis < 0) {
    if (rank < 0) ctx.fail("a negative axis needs the inputs' rank, which is unknown");
    axis += rank;
  }

  bool all_static = true;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < n; ++i) {
    const Shape& s = ctx.shape(ctx.input(i));
    if (!s.rank_known || !s.dims.at(static_cast<size_t>(axis)).is_static()) {
      all_static = false;
      break;
    }
    sizes.push_back(s.dims[static_cast<size_t>(axis)].value());
  }
  ValueId split;
  if (all_static) {
    split = ctx.int64s(sizes);
  } else {  // each input's size along the axis, gathered from its shape at run time
    std::vector<ValueId> parts;
    ValueId index = ctx.int64s({axis});
    for (size_t i = 0; i < n; ++i) parts.push_back(ctx.emit("Gather", {ctx.shape_of(ctx.input(i)), index}));
    split = ctx.emit("Concat", parts, {{"axis", int64_t{0}}});
  }
  std::vector<ValueId> dxs =
      ctx.emit("Split", {ctx.output_grad(0), split}, {{"axis", axis}}, std::vector<bool>(n, true));
  for (size_t i = 0; i < n; ++i) ctx.add_input_grad(i, dxs[i]);
}

}  // namespace onnxtrain::gradient_rules
