// Registration functions of the op families, one per file in graph/ops/. registry.cc calls them all.
#pragma once

namespace onnxtrain {

class OpRegistry;
class InferContext;
struct CostContext;
struct OpCost;
struct Shape;

// Conv's shape inference for a weight of shape `weight` (M, C/group, k1..kn), which need not be the node's
// input 1: TapMajorConv holds its weight in another layout (graph/ops/training/tap_major_conv.cc).
void infer_conv_with_weight(InferContext& ctx, const Shape& weight);
// ConvGrad's cost for the forward convolution's `macs`: 2·macs for each of dX and dW the node outputs, and
// dY's elements for dB (graph/ops/training/conv_grad.cc); TapMajorConvGrad's too.
OpCost conv_grad_cost_of(const CostContext& ctx, double macs);

void register_builtin_ops(OpRegistry& registry);

// --- shape and data movement ops (they also use shape_rules.h) ---
void register_shape_size_ops(OpRegistry& registry);
void register_gather_ops(OpRegistry& registry);
void register_cumsum_op(OpRegistry& registry);
void register_trilu_op(OpRegistry& registry);
void register_squeeze_ops(OpRegistry& registry);
void register_concat_split_ops(OpRegistry& registry);
void register_reshape_ops(OpRegistry& registry);
void register_slice_ops(OpRegistry& registry);
void register_transpose_ops(OpRegistry& registry);
void register_expand_tile_ops(OpRegistry& registry);
void register_cast_identity_ops(OpRegistry& registry);
void register_constant_ops(OpRegistry& registry);
void register_pad_ops(OpRegistry& registry);
void register_resize_ops(OpRegistry& registry);       // Resize, Upsample
void register_depth_space_ops(OpRegistry& registry);  // DepthToSpace, SpaceToDepth
void register_gather_elements_op(OpRegistry& registry);
void register_scatter_elements_op(OpRegistry& registry);
void register_gather_nd_op(OpRegistry& registry);
void register_scatter_nd_op(OpRegistry& registry);
void register_compare_logic_ops(OpRegistry& registry);
// --- math ops ---
void register_elementwise_binary_ops(OpRegistry& registry);
void register_mod_op(OpRegistry& registry);
void register_top_k_op(OpRegistry& registry);
void register_elementwise_unary_ops(OpRegistry& registry);
void register_variadic_ops(OpRegistry& registry);
void register_conv_ops(OpRegistry& registry);
void register_gemm_op(OpRegistry& registry);
void register_matmul_op(OpRegistry& registry);
void register_pooling_ops(OpRegistry& registry);
void register_batch_norm_ops(OpRegistry& registry);
void register_layer_norm_op(OpRegistry& registry);
void register_lrn_op(OpRegistry& registry);
void register_softmax_ops(OpRegistry& registry);
void register_reduce_ops(OpRegistry& registry);
void register_dropout_op(OpRegistry& registry);
void register_loss_ops(OpRegistry& registry);
void register_recurrent_ops(OpRegistry& registry);  // RNN, GRU, LSTM
// --- onnxtrain's backward ops (domain kTrainingDomain), in graph/ops/training/ ---
// --- elementwise ---
void register_activation_grad_op(OpRegistry& registry);
// --- end elementwise ---
// --- data movement ---
void register_slice_grad_op(OpRegistry& registry);
void register_gather_grad_op(OpRegistry& registry);
void register_gather_elements_grad_op(OpRegistry& registry);
void register_gather_nd_grad_op(OpRegistry& registry);
void register_dropout_grad_op(OpRegistry& registry);
void register_pad_grad_op(OpRegistry& registry);
void register_resize_grad_op(OpRegistry& registry);
// --- end data movement ---
// --- conv, gemm, matmul ---
void register_conv_grad_op(OpRegistry& registry);
void register_tap_major_conv_ops(OpRegistry& registry);
void register_fused_matmul_op(OpRegistry& registry);
// --- end conv, gemm, matmul ---
// --- pooling, softmax, LRN ---
void register_pooling_grad_ops(OpRegistry& registry);
void register_softmax_grad_ops(OpRegistry& registry);
void register_lrn_grad_op(OpRegistry& registry);
// --- end pooling, softmax, LRN ---
// --- normalisation ---
void register_batch_norm_grad_op(OpRegistry& registry);
void register_instance_norm_grad_op(OpRegistry& registry);
void register_layer_norm_grad_op(OpRegistry& registry);
// --- end normalisation ---
// --- reductions and losses ---
void register_loss_grad_ops(OpRegistry& registry);
// --- end reductions and losses ---
void register_recurrent_grad_op(OpRegistry& registry);
// --- end backward ops ---

}  // namespace onnxtrain
