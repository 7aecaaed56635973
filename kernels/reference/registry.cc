// The one explicit table of reference kernel families.
#include "kernels/kernel.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

void register_reference_kernels(KernelRegistry& registry) {
  // --- elementwise, reductions, softmax ---
  register_reference_elementwise_binary_kernels(registry);
  register_reference_elementwise_unary_kernels(registry);
  register_reference_compare_logic_kernels(registry);
  register_reference_cast_kernels(registry);
  register_reference_reduce_kernels(registry);
  register_reference_softmax_kernels(registry);
  // --- conv, matmul, pooling, normalisation, losses ---
  register_reference_conv_kernels(registry);
  register_reference_conv_transpose_kernels(registry);
  register_reference_gemm_kernels(registry);
  register_reference_matmul_kernels(registry);
  register_reference_pooling_kernels(registry);
  register_reference_batch_norm_kernels(registry);
  register_reference_instance_norm_kernels(registry);
  register_reference_layer_norm_kernels(registry);
  register_reference_lrn_kernels(registry);
  register_reference_dropout_kernels(registry);
  register_reference_loss_kernels(registry);
  // --- data movement ---
  register_reference_shape_size_kernels(registry);
  register_reference_gather_kernels(registry);
  register_reference_cumsum_kernels(registry);
  register_reference_trilu_kernels(registry);
  register_reference_reshape_kernels(registry);
  register_reference_concat_split_kernels(registry);
  register_reference_slice_kernels(registry);
  register_reference_transpose_kernels(registry);
  register_reference_expand_tile_kernels(registry);
  register_reference_constant_kernels(registry);
  register_reference_pad_kernels(registry);
  register_reference_resize_kernels(registry);
  register_reference_depth_space_kernels(registry);
  register_reference_gather_elements_kernels(registry);
  register_reference_top_k_kernels(registry);
  register_reference_scatter_elements_kernels(registry);
  register_reference_gather_nd_kernels(registry);
  register_reference_scatter_nd_kernels(registry);
  register_reference_recurrent_kernels(registry);
  // --- backward ops (domain ai.onnxtrain) ---
  // --- backward: elementwise ---
  register_reference_activation_grad_kernels(registry);
  // --- end elementwise ---
  // --- backward: data movement ---
  register_reference_slice_grad_kernels(registry);
  register_reference_gather_grad_kernels(registry);
  register_reference_gather_elements_grad_kernels(registry);
  register_reference_gather_nd_grad_kernels(registry);
  register_reference_dropout_grad_kernels(registry);
  register_reference_pad_grad_kernels(registry);
  register_reference_resize_grad_kernels(registry);
  // --- end data movement ---
  // --- backward: conv, gemm, matmul ---
  register_reference_conv_grad_kernels(registry);
  register_reference_tap_major_conv_kernels(registry);
  // --- end conv, gemm, matmul ---
  // --- backward: pooling, softmax, LRN ---
  register_reference_pooling_grad_kernels(registry);
  register_reference_softmax_grad_kernels(registry);
  register_reference_lrn_grad_kernels(registry);
  // --- end pooling, softmax, LRN ---
  // --- backward: normalisation ---
  register_reference_batch_norm_grad_kernels(registry);
  register_reference_instance_norm_grad_kernels(registry);
  register_reference_layer_norm_grad_kernels(registry);
  register_reference_recurrent_grad_kernel(registry);
  // --- end normalisation ---
  // --- backward: reductions and losses ---
  register_reference_loss_grad_kernels(registry);
  // --- end reductions and losses ---
  (void)registry;
}

}  // namespace onnxtrain
