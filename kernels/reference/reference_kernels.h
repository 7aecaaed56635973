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
void register_reference_reshape_kernels(KernelRegistry& registry);
void register_reference_concat_split_kernels(KernelRegistry& registry);
void register_reference_slice_kernels(KernelRegistry& registry);
void register_reference_transpose_kernels(KernelRegistry& registry);
void register_reference_expand_tile_kernels(KernelRegistry& registry);
void register_reference_constant_kernels(KernelRegistry& registry);
void register_reference_pad_kernels(KernelRegistry& registry);
// --- backward ops (domain ai.onnxtrain) ---
// --- backward: elementwise ---
// --- end elementwise ---
// --- backward: data movement ---
// --- end data movement ---
// --- backward: conv, gemm, matmul ---
// --- end conv, gemm, matmul ---
// --- backward: pooling, softmax, LRN ---
// --- end pooling, softmax, LRN ---
// --- backward: normalisation ---
// --- end normalisation ---
// --- backward: reductions and losses ---
// --- end reductions and losses ---

}  // namespace onnxtrain
