// Registration functions of the op families, one per file in graph/ops/. registry.cc calls them all.
#pragma once

namespace onnxtrain {

class OpRegistry;

void register_builtin_ops(OpRegistry& registry);

// --- shape and data movement ops (shape_ops helper section) ---
// --- math ops (math_ops helper section) ---

}  // namespace onnxtrain
