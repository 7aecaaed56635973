// What the data-movement gradient rules share: the values of a small int input (repeats, pads, a shape)
// when they are known at graph-build time, from a constant's data or from shape inference's known dims.
#pragma once

#include <optional>
#include <vector>

#include "graph/autodiff/gradient_rule.h"

namespace onnxtrain::gradient_rules {

// nullopt when `v` is neither a constant nor a vector of static known dims.
inline std::optional<std::vector<int64_t>> static_ints(const GradientContext& ctx, ValueId v) {
  const Value& value = ctx.value(v);
  if (value.data && !is_floating(value.dtype)) return value.data->to_int64();
  if (!value.known) return std::nullopt;
  std::vector<int64_t> ints;
  for (const Dim& d : *value.known) {
    if (!d.is_static()) return std::nullopt;
    ints.push_back(d.value());
  }
  return ints;
}

}  // namespace onnxtrain::gradient_rules
