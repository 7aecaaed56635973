// What the gradient rules of the Reduce* ops share: which axes a node reduced, and the upstream
// gradient broadcast back to the input's shape (unsqueezed at the reduced axes when keepdims=0, then
// expanded).
#pragma once

#include <optional>
#include <vector>

#include "graph/autodiff/gradient_rule.h"

namespace onnxtrain::gradient_rules {

// The reduced axes of input 0, normalised and sorted (every axis for "reduce all"); empty when the node
// is the identity (noop_with_empty_axes with no axes). Fails when the axes are not known statically.
std::vector<int64_t> reduced_axes(const GradientContext& ctx);

// `g` (shaped like the node's output) as a tensor shaped like input 0.
ValueId broadcast_to_input(GradientContext& ctx, ValueId g);

// `v` (shaped like the node's output) with the reduced dims kept as 1 (unsqueezed when keepdims=0), so it
// broadcasts against input 0 in elementwise ops without an Expand.
ValueId with_reduced_dims(GradientContext& ctx, ValueId v);

// Whether the node copies its input (noop_with_empty_axes with no axes, or a 0-D input): dx = dy.
bool is_identity_reduction(const GradientContext& ctx);

}  // namespace onnxtrain::gradient_rules
