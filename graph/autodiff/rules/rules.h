// The gradient rules, one per file in this folder (a rule may serve several ops with the same math,
// like Reshape/Flatten/Squeeze/Unsqueeze). registry.cc lists which op uses which rule.
#pragma once

#include "graph/autodiff/gradient_rule.h"

namespace onnxtrain::gradient_rules {

// --- elementwise arithmetic and activations ---
void add_gradient(GradientContext& ctx);
void sub_gradient(GradientContext& ctx);
void mul_gradient(GradientContext& ctx);
// --- end elementwise ---

// --- data movement ---
// --- end data movement ---

// --- conv, gemm, matmul ---
// --- end conv, gemm, matmul ---

// --- pooling, softmax, LRN ---
// --- end pooling, softmax, LRN ---

// --- normalisation ---
// --- end normalisation ---

// --- reductions and losses ---
void reduce_sum_gradient(GradientContext& ctx);
// --- end reductions and losses ---

}  // namespace onnxtrain::gradient_rules
