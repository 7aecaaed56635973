// MatMul trained as FusedMatMul (graph/ops/training/fused_matmul.cc) on the CPU: a float32 MatMul of two
// operands of rank 2 or more becomes a FusedMatMul, which then absorbs
//   - a Transpose that swaps the last two axes of an operand and feeds nothing else (transA/transB), also
//     through a Mul or Div by a scalar between them (the scaling moves before the swap: the same values);
//   - a Mul or Div by a float32 constant of one element that alone feeds an operand or alone reads the
//     product (alpha: ViT's q and k each scaled by d^-1/4, BERT's and GPT-2's scores divided by √d), so
//     that neither the scaling nor its gradient makes a pass over the tensor; the product then rounds
//     differently from scaling first (float32 rounding, no longer bit for bit the unfused graph);
//   - an Add of a (N) bias that alone reads the (scaled) product (C).
// A transformer's attention transposes its keys into Q·Kᵀ, its linear layers add their bias to a MatMul, and
// MatMul's own gradients multiply by transposed operands: apart, each transpose is a copy of a matrix and each
// bias a pass over the activation, forward and backward. FusedMatMul's gradient rule picks the operands'
// flags instead (oneDNN reads a transposed matrix through its strides). The training graph of torchvision's
// ViT (TorchScript export, 6 layers of width 256) loses 72 of its 158 Transposes and 18 of its 37 Adds
// (benchmarks/training_step_profile).
//
// In float32 only the training graph is fused (the evaluation graph and the written model keep the original
// nodes). Under bf16 or fp16 the fusion runs before autocast (training_recipe.h), so the evaluation graph,
// which computes in that precision too, has the FusedMatMuls; the written model keeps the original nodes.
//
//   int fused = fuse_matmul(forward);   // make_training_recipe, before autodiff
#pragma once

#include "graph/graph.h"

namespace onnxtrain {

// Turns every such MatMul of `graph` into a FusedMatMul and folds what it can into it; returns how many
// MatMuls became FusedMatMuls.
int fuse_matmul(Graph& graph);

}  // namespace onnxtrain
