// The gradient rules, one per file in this folder (a rule may serve several ops with the same math,
// like Reshape/Flatten/Squeeze/Unsqueeze). registry.cc lists which op uses which rule.
#pragma once

#include "graph/autodiff/gradient_rule.h"

namespace onnxtrain::gradient_rules {

// --- elementwise arithmetic and activations ---
void add_gradient(GradientContext& ctx);
void sub_gradient(GradientContext& ctx);
void mul_gradient(GradientContext& ctx);
void div_gradient(GradientContext& ctx);
void mod_gradient(GradientContext& ctx);
void top_k_gradient(GradientContext& ctx);
void pow_gradient(GradientContext& ctx);
void neg_gradient(GradientContext& ctx);
void activation_gradient(GradientContext& ctx);  // the ActivationGrad ops: Relu ... Reciprocal
void clip_gradient(GradientContext& ctx);
void prelu_gradient(GradientContext& ctx);
void where_gradient(GradientContext& ctx);
void max_min_gradient(GradientContext& ctx);
void sum_mean_gradient(GradientContext& ctx);
void cast_gradient(GradientContext& ctx);  // Cast, CastLike
// ONNX's TensorProto code of `dtype` (Cast's `to`), 0 when it has none: the inverse of dtype_from_onnx_code.
int64_t onnx_code_of(DType dtype);
void identity_gradient(GradientContext& ctx);
// --- end elementwise ---

// --- data movement ---
void reshape_gradient(GradientContext& ctx);  // Reshape, Flatten, Squeeze, Unsqueeze
void transpose_gradient(GradientContext& ctx);
void concat_gradient(GradientContext& ctx);
void split_gradient(GradientContext& ctx);
void slice_gradient(GradientContext& ctx);
void gather_gradient(GradientContext& ctx);
void cumsum_gradient(GradientContext& ctx);
void trilu_gradient(GradientContext& ctx);
void expand_gradient(GradientContext& ctx);
void tile_gradient(GradientContext& ctx);
void pad_gradient(GradientContext& ctx);
void resize_gradient(GradientContext& ctx);       // Resize, Upsample
void depth_space_gradient(GradientContext& ctx);  // DepthToSpace, SpaceToDepth
void gather_elements_gradient(GradientContext& ctx);
void scatter_elements_gradient(GradientContext& ctx);
void gather_nd_gradient(GradientContext& ctx);
void scatter_nd_gradient(GradientContext& ctx);
void dropout_gradient(GradientContext& ctx);
// --- end data movement ---

// --- conv, gemm, matmul ---
void conv_gradient(GradientContext& ctx);
void conv_transpose_gradient(GradientContext& ctx);
void tap_major_conv_gradient(GradientContext& ctx);
void fused_matmul_gradient(GradientContext& ctx);
// MatMul's and FusedMatMul's gradients where A (..., M, K) is a batch of rows and B (K, N) one matrix, read
// transposed (N, K) when `trans_b`: Gemms over the flattened rows (rules/matmul.cc), scaled by `alpha` (the
// product's own: FusedMatMul's alpha).
void rows_times_matrix_gradient(GradientContext& ctx, ValueId dy, int64_t k, int64_t n, bool trans_b,
                                double alpha = 1.0);
void gemm_gradient(GradientContext& ctx);
void matmul_gradient(GradientContext& ctx);
// --- end conv, gemm, matmul ---

// --- pooling, softmax, LRN ---
void max_pool_gradient(GradientContext& ctx);
void average_pool_gradient(GradientContext& ctx);
void global_average_pool_gradient(GradientContext& ctx);
void global_max_pool_gradient(GradientContext& ctx);
void softmax_gradient(GradientContext& ctx);
void log_softmax_gradient(GradientContext& ctx);
void lrn_gradient(GradientContext& ctx);
// --- end pooling, softmax, LRN ---

// --- normalisation ---
void batch_norm_gradient(GradientContext& ctx);
void instance_norm_gradient(GradientContext& ctx);
void layer_norm_gradient(GradientContext& ctx);
// --- end normalisation ---

// --- reductions and losses ---
void reduce_sum_gradient(GradientContext& ctx);
void reduce_mean_gradient(GradientContext& ctx);
void reduce_max_min_gradient(GradientContext& ctx);  // ReduceMax and ReduceMin
void reduce_prod_gradient(GradientContext& ctx);
void reduce_sum_square_gradient(GradientContext& ctx);
void reduce_log_sum_gradient(GradientContext& ctx);
void reduce_log_sum_exp_gradient(GradientContext& ctx);
void reduce_l1_gradient(GradientContext& ctx);
void reduce_l2_gradient(GradientContext& ctx);
void softmax_cross_entropy_loss_gradient(GradientContext& ctx);    // losses.cc
void negative_log_likelihood_loss_gradient(GradientContext& ctx);  // losses.cc
// --- end reductions and losses ---
void recurrent_gradient(GradientContext& ctx);  // RNN, GRU, LSTM

}  // namespace onnxtrain::gradient_rules
