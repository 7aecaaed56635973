// The one explicit table of op families. Adding an op family adds one line here.
#include "graph/op_schema.h"
#include "graph/ops/ops.h"

namespace onnxtrain {

void register_builtin_ops(OpRegistry& registry) {
  // --- shape and data movement ops ---
  register_shape_size_ops(registry);
  register_gather_ops(registry);
  register_cumsum_op(registry);
  register_trilu_op(registry);
  register_squeeze_ops(registry);
  register_concat_split_ops(registry);
  register_reshape_ops(registry);
  register_slice_ops(registry);
  register_transpose_ops(registry);
  register_expand_tile_ops(registry);
  register_cast_identity_ops(registry);
  register_constant_ops(registry);
  register_pad_ops(registry);
  register_resize_ops(registry);
  register_depth_space_ops(registry);
  register_gather_elements_op(registry);
  register_scatter_elements_op(registry);
  register_gather_nd_op(registry);
  register_scatter_nd_op(registry);
  register_compare_logic_ops(registry);
  // --- math ops ---
  register_elementwise_binary_ops(registry);
  register_mod_op(registry);
  register_top_k_op(registry);
  register_elementwise_unary_ops(registry);
  register_variadic_ops(registry);
  register_conv_ops(registry);
  register_gemm_op(registry);
  register_matmul_op(registry);
  register_pooling_ops(registry);
  register_batch_norm_ops(registry);
  register_layer_norm_op(registry);
  register_lrn_op(registry);
  register_softmax_ops(registry);
  register_reduce_ops(registry);
  register_dropout_op(registry);
  register_loss_ops(registry);
  // --- onnxtrain's backward ops (domain kTrainingDomain) ---
  // --- elementwise ---
  register_activation_grad_op(registry);
  // --- end elementwise ---
  // --- data movement ---
  register_slice_grad_op(registry);
  register_gather_grad_op(registry);
  register_gather_elements_grad_op(registry);
  register_gather_nd_grad_op(registry);
  register_dropout_grad_op(registry);
  register_pad_grad_op(registry);
  register_resize_grad_op(registry);
  // --- end data movement ---
  // --- conv, gemm, matmul ---
  register_conv_grad_op(registry);
  register_tap_major_conv_ops(registry);
  register_fused_matmul_op(registry);
  // --- end conv, gemm, matmul ---
  // --- pooling, softmax, LRN ---
  register_pooling_grad_ops(registry);
  register_softmax_grad_ops(registry);
  register_lrn_grad_op(registry);
  // --- end pooling, softmax, LRN ---
  // --- normalisation ---
  register_batch_norm_grad_op(registry);
  register_instance_norm_grad_op(registry);
  register_layer_norm_grad_op(registry);
  // --- end normalisation ---
  // --- reductions and losses ---
  register_loss_grad_ops(registry);
  // --- end reductions and losses ---
  // --- end backward ops ---
  register_recurrent_ops(registry);
  register_recurrent_grad_op(registry);
  (void)registry;
}

}  // namespace onnxtrain
