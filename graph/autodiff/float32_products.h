// The backward pass's casts back to float32, folded into the half products they read. Under autocast
// (bf16, fp16) a product's operand is a Cast of a float32 value to half, so the operand's gradient is the
// product's half output cast back to float32 (the Cast's own gradient rule):
//   dA_half = FusedMatMul(dY_half, B_half) or Gemm(...)     (then, for a batch of rows, a Reshape)
//   dA      = Cast(dA_half, to=float)
// The product writes the float32 result itself (FusedMatMul's float32_output: accumulated in float32,
// never rounded to half), and the Cast and its pass over the tensor go. A Gemm without C becomes the
// FusedMatMul it equals (the same flags and alpha); Reshapes and Transposes between the product and the
// Cast stay, on the float32 value (move_half_casts_before_transposes, below, puts the forward's Transposes
// after the Casts to half, so their gradients come between). It also rounds less: the float32 sums are
// never rounded to half on the way.
//
// The torchvision ViT's bf16 training graph loses 74 of its 192 Casts. At one thread their kernels took
// 16-20 ms of a 290-400 ms step, while the products that now write twice the bytes take about 12 ms more
// (node by node): about 2% of the step by the median of 7 interleaved pairs, within the host's noise
// (`training_step_profile vit.onnx 32 12 0 bf16`, 2026-12-06).
//
// Only where the product's output has no other reader; only the backward nodes (the forward's products
// already write float32 under autocast: mixed_precision.h). The CPU's rewrite, as fuse_matmul.
//
//   int folded = fold_casts_into_products(recipe.training);   // make_training_recipe, after autodiff
#pragma once

#include "graph/autodiff/training_graph.h"

namespace onnxtrain {

// Folds every such Cast of `training`'s backward nodes; returns how many it removed.
int fold_casts_into_products(TrainingGraph& training);

// The forward's casts to half before its Transposes: a Cast to bfloat16 or float16 that alone reads a
// Transpose's output, directly or through Reshapes that each alone read what they read, moves before the
// Transpose, Cast(Reshape(Transpose(x))) -> Reshape(Transpose(Cast(x))): the same values, with the
// Transpose moving half the bytes. nn.MultiheadAttention's q, k and v heads (S, N·H, d) -> (N·H, S, d) and
// its output before out_proj are such Transposes (FusedMatMul folds only those of its last two axes).
// Their gradients stay float32, as fold_casts_into_products folds the Casts back through them.
// The CPU's rewrite, with fold_casts_into_products; on the forward graph after autocast, before autodiff.
// Returns how many Casts it moved.
int move_half_casts_before_transposes(Graph& forward);

}  // namespace onnxtrain
