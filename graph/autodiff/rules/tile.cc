// Tile: y = x repeated r_k times along each axis k, so y viewed as (r_0, d_0, r_1, d_1, ...) holds a copy
// of x for every (r_0, r_1, ...) and dx = ReduceSum(Reshape(dy, (r_0, d_0, r_1, d_1, ...)), axes 0, 2, ...).
// Needs x's sizes statically, and the repeats but one: a repeat known only at run time (a batch's, in
// DeBERTa-v2's attention) is Reshape's -1.
#include "graph/autodiff/rules/rules.h"
#include "graph/autodiff/rules/static_ints.h"

namespace onnxtrain::gradient_rules {

namespace {

// The repeats as shape inference knows them, -1 for the one that is a symbol; nullopt unless every other
// is a number.
std::optional<std::vector<int64_t>> repeats_but_one(const Value& repeats) {
  if (!repeats.known) return std::nullopt;
  std::vector<int64_t> ints;
  int unknown = 0;
  for (const Dim& d : *repeats.known) {
    unknown += d.is_static() ? 0 : 1;
    ints.push_back(d.is_static() ? d.value() : -1);
  }
  return unknown <= 1 ? std::optional(ints) : std::nullopt;
}

}  // namespace

void tile_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  const Shape& x = ctx.shape(ctx.input(0));
  std::optional<std::vector<int64_t>> repeats = static_ints(ctx, ctx.input(1));
  if (!repeats) repeats = repeats_but_one(ctx.value(ctx.input(1)));
  if (!x.rank_known || !x.is_static() || !repeats) {
    ctx.fail("the input's sizes " + x.to_string() + " and the repeats (all but one) must be known statically");
  }
  const std::vector<int64_t> sizes = x.static_sizes();
  if (repeats->size() != sizes.size()) ctx.fail("repeats must have one entry per input dim");
  std::vector<int64_t> interleaved, axes;
  bool repeated = false;
  for (size_t k = 0; k < sizes.size(); ++k) {
    axes.push_back(static_cast<int64_t>(interleaved.size()));
    interleaved.push_back((*repeats)[k]);
    interleaved.push_back(sizes[k]);
    repeated = repeated || (*repeats)[k] != 1;
  }
  ValueId dy = ctx.output_grad(0);
  if (!repeated) {
    ctx.add_input_grad(0, dy);
    return;
  }
  ValueId view = ctx.emit("Reshape", {dy, ctx.int64s(interleaved)}, {{"allowzero", int64_t{1}}});
  ctx.add_input_grad(0, ctx.emit("ReduceSum", {view, ctx.int64s(axes)}, {{"keepdims", int64_t{0}}}));
}

}  // namespace onnxtrain::gradient_rules
