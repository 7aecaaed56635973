// oneDNN CPU kernels (implementation "onednn"), one file per op family; the registry prefers them over
// the reference kernels for float32. register_onednn_kernels calls every family's registration.
#pragma once

namespace onnxtrain {

class KernelRegistry;

void register_onednn_kernels(KernelRegistry& registry);

// --- conv, matmul, gemm (helper D section) ---
void register_onednn_conv_kernels(KernelRegistry& registry);    // conv.cc: Conv
void register_onednn_matmul_kernels(KernelRegistry& registry);  // matmul.cc: MatMul, Gemm
// --- pooling, batch norm, eltwise, softmax, lrn, layer norm (helper E section) ---
void register_onednn_pooling_kernels(KernelRegistry& registry);
void register_onednn_batch_norm_kernels(KernelRegistry& registry);
void register_onednn_eltwise_kernels(KernelRegistry& registry);
void register_onednn_softmax_kernels(KernelRegistry& registry);
void register_onednn_lrn_kernels(KernelRegistry& registry);
void register_onednn_layer_norm_kernels(KernelRegistry& registry);
// --- backward ops (domain ai.onnxtrain) ---
// --- backward: elementwise ---
void register_onednn_eltwise_backward_kernels(KernelRegistry& registry);  // eltwise_backward.cc: ActivationGrad
// --- end elementwise ---
// --- backward: data movement ---
// --- end data movement ---
// --- backward: conv, gemm, matmul ---
void register_onednn_conv_grad_kernels(KernelRegistry& registry);  // conv_grad.cc: ConvGrad
// --- end conv, gemm, matmul ---
// --- backward: pooling, softmax, LRN ---
void register_onednn_pooling_grad_kernels(KernelRegistry& registry);
void register_onednn_softmax_grad_kernels(KernelRegistry& registry);
void register_onednn_lrn_grad_kernels(KernelRegistry& registry);
// --- end pooling, softmax, LRN ---
// --- backward: normalisation ---
void register_onednn_batch_norm_grad_kernels(KernelRegistry& registry);
void register_onednn_layer_norm_grad_kernels(KernelRegistry& registry);
void register_onednn_recurrent_kernels(KernelRegistry& registry);  // RNN, GRU, LSTM (recurrent.cc)
void register_onednn_recurrent_grad_kernel(KernelRegistry& registry);
// --- end normalisation ---
// --- backward: reductions and losses ---
// --- end reductions and losses ---

}  // namespace onnxtrain
