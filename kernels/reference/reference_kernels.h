// Reference kernels: plain loops over float32/float64 (and the int/bool types index and shape ops use),
// one file per op family. They are the test oracle for every other implementation, never the fast path.
// Each family registers itself with one function; register_reference_kernels calls them all.
#pragma once

namespace onnxtrain {

class KernelRegistry;

void register_reference_kernels(KernelRegistry& registry);

// --- elementwise, reductions, softmax (helper A section) ---
void register_reference_elementwise_binary_kernels(KernelRegistry& registry);
void register_reference_elementwise_unary_kernels(KernelRegistry& registry);
void register_reference_compare_logic_kernels(KernelRegistry& registry);
void register_reference_cast_kernels(KernelRegistry& registry);
void register_reference_reduce_kernels(KernelRegistry& registry);
void register_reference_softmax_kernels(KernelRegistry& registry);
// --- conv, matmul, pooling, normalisation, losses (helper B section) ---
void register_reference_conv_kernels(KernelRegistry& registry);
void register_reference_conv_transpose_kernels(KernelRegistry& registry);
void register_reference_gemm_kernels(KernelRegistry& registry);
void register_reference_matmul_kernels(KernelRegistry& registry);
void register_reference_pooling_kernels(KernelRegistry& registry);
void register_reference_batch_norm_kernels(KernelRegistry& registry);
void register_reference_instance_norm_kernels(KernelRegistry& registry);
void register_reference_layer_norm_kernels(KernelRegistry& registry);
void register_reference_lrn_kernels(KernelRegistry& registry);
void register_reference_dropout_kernels(KernelRegistry& registry);
void register_reference_loss_kernels(KernelRegistry& registry);
// --- data movement (helper C section) ---
void register_reference_shape_size_kernels(KernelRegistry& registry);
void register_reference_gather_kernels(KernelRegistry& registry);
void register_reference_cumsum_kernels(KernelRegistry& registry);
void register_reference_trilu_kernels(KernelRegistry& registry);
void register_reference_reshape_kernels(KernelRegistry& registry);
void register_reference_concat_split_kernels(KernelRegistry& registry);
void register_reference_slice_kernels(KernelRegistry& registry);
void register_reference_transpose_kernels(KernelRegistry& registry);
void register_reference_expand_tile_kernels(KernelRegistry& registry);
void register_reference_constant_kernels(KernelRegistry& registry);
void register_reference_pad_kernels(KernelRegistry& registry);
void register_reference_resize_kernels(KernelRegistry& registry);       // Resize, Upsample
void register_reference_depth_space_kernels(KernelRegistry& registry);  // DepthToSpace, SpaceToDepth
void register_reference_gather_elements_kernels(KernelRegistry& registry);
void register_reference_top_k_kernels(KernelRegistry& registry);
void register_reference_scatter_elements_kernels(KernelRegistry& registry);
void register_reference_gather_nd_kernels(KernelRegistry& registry);
void register_reference_scatter_nd_kernels(KernelRegistry& registry);
void register_reference_recurrent_kernels(KernelRegistry& registry);  // RNN, GRU, LSTM
// --- backward ops (domain ai.onnxtrain) ---
// --- backward: elementwise ---
void register_reference_activation_grad_kernels(KernelRegistry& registry);
// --- end elementwise ---
// --- backward: data movement ---
void register_reference_slice_grad_kernels(KernelRegistry& registry);
void register_reference_gather_grad_kernels(KernelRegistry& registry);
void register_reference_gather_elements_grad_kernels(KernelRegistry& registry);
void register_reference_gather_nd_grad_kernels(KernelRegistry& registry);
void register_reference_dropout_grad_kernels(KernelRegistry& registry);
void register_reference_pad_grad_kernels(KernelRegistry& registry);
void register_reference_resize_grad_kernels(KernelRegistry& registry);
// --- end data movement ---
// --- backward: conv, gemm, matmul ---
void register_reference_conv_grad_kernels(KernelRegistry& registry);
void register_reference_tap_major_conv_kernels(KernelRegistry& registry);
// --- end conv, gemm, matmul ---
// --- backward: pooling, softmax, LRN ---
void register_reference_pooling_grad_kernels(KernelRegistry& registry);
void register_reference_softmax_grad_kernels(KernelRegistry& registry);
void register_reference_lrn_grad_kernels(KernelRegistry& registry);
// --- end pooling, softmax, LRN ---
// --- backward: normalisation ---
void register_reference_batch_norm_grad_kernels(KernelRegistry& registry);
void register_reference_instance_norm_grad_kernels(KernelRegistry& registry);
void register_reference_layer_norm_grad_kernels(KernelRegistry& registry);
void register_reference_recurrent_grad_kernel(KernelRegistry& registry);
// --- end normalisation ---
// --- backward: reductions and losses ---
void register_reference_loss_grad_kernels(KernelRegistry& registry);
// --- end reductions and losses ---

}  // namespace onnxtrain
