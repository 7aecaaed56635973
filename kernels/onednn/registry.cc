// The one explicit table of oneDNN kernel families.
#include "kernels/kernel.h"
#include "kernels/onednn/onednn_kernels.h"

namespace onnxtrain {

void register_onednn_kernels(KernelRegistry& registry) {
  // --- conv, matmul, gemm ---
  register_onednn_conv_kernels(registry);
  register_onednn_matmul_kernels(registry);
  // --- pooling, batch norm, eltwise, softmax, lrn, layer norm ---
  register_onednn_pooling_kernels(registry);
  register_onednn_batch_norm_kernels(registry);
  register_onednn_eltwise_kernels(registry);
  register_onednn_softmax_kernels(registry);
  register_onednn_lrn_kernels(registry);
  register_onednn_layer_norm_kernels(registry);
  // --- backward ops (domain ai.onnxtrain) ---
  // --- backward: elementwise ---
  register_onednn_eltwise_backward_kernels(registry);
  // --- end elementwise ---
  // --- backward: data movement ---
  // --- end data movement ---
  // --- backward: conv, gemm, matmul ---
  register_onednn_conv_grad_kernels(registry);
  // --- end conv, gemm, matmul ---
  // --- backward: pooling, softmax, LRN ---
  register_onednn_pooling_grad_kernels(registry);
  register_onednn_softmax_grad_kernels(registry);
  register_onednn_lrn_grad_kernels(registry);
  // --- end pooling, softmax, LRN ---
  // --- backward: normalisation ---
  register_onednn_batch_norm_grad_kernels(registry);
  register_onednn_layer_norm_grad_kernels(registry);
  // --- end normalisation ---
  // --- backward: reductions and losses ---
  // --- end reductions and losses ---
  register_onednn_recurrent_kernels(registry);
  register_onednn_recurrent_grad_kernel(registry);
  (void)registry;
}

}  // namespace onnxtrain
