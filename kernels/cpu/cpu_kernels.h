// Registration functions of the "cpu" kernel families (kernels/cpu/), called from kernels/cpu/registry.cc.
#pragma once

namespace onnxtrain {

class KernelRegistry;

void register_cpu_kernels(KernelRegistry& registry);

// --- elementwise ---
void register_cpu_elementwise_binary_kernels(KernelRegistry& registry);           // Add … Mean, PRelu
void register_cpu_elementwise_compare_kernels(KernelRegistry& registry);          // Equal … And, Where
void register_cpu_elementwise_unary_kernels(KernelRegistry& registry);            // Neg, Log, Erf, Selu, ...
void register_cpu_elementwise_dropout_kernels(KernelRegistry& registry);          // Dropout, DropoutGrad
void register_cpu_elementwise_activation_grad_kernels(KernelRegistry& registry);  // ActivationGrad (via oneDNN)
// --- end elementwise ---
// --- reductions ---
void register_cpu_reduce_kernels(KernelRegistry& registry);      // reduce.cc: ReduceSum/Mean/Max/Min/Prod/L1/L2/...
void register_cpu_arg_reduce_kernels(KernelRegistry& registry);  // reduce_arg.cc: ArgMax, ArgMin
// --- end reductions ---
// --- data movement ---
void register_cpu_transpose_kernels(KernelRegistry& registry);
void register_cpu_concat_split_kernels(KernelRegistry& registry);
void register_cpu_slice_kernels(KernelRegistry& registry);
void register_cpu_gather_kernels(KernelRegistry& registry);
void register_cpu_expand_tile_kernels(KernelRegistry& registry);
void register_cpu_pad_kernels(KernelRegistry& registry);
void register_cpu_resize_kernels(KernelRegistry& registry);       // Resize, Upsample, ResizeGrad
void register_cpu_depth_space_kernels(KernelRegistry& registry);  // DepthToSpace, SpaceToDepth
void register_cpu_cast_kernels(KernelRegistry& registry);
void register_cpu_reshape_kernels(KernelRegistry& registry);
// --- end data movement ---
// --- losses and normalisation ---
void register_cpu_loss_kernels(KernelRegistry& registry);
void register_cpu_loss_grad_kernels(KernelRegistry& registry);
void register_cpu_instance_norm_kernels(KernelRegistry& registry);
void register_cpu_instance_norm_grad_kernels(KernelRegistry& registry);
void register_cpu_conv_transpose_kernels(KernelRegistry& registry);
void register_cpu_max_pool_kernels(KernelRegistry& registry);
void register_cpu_max_pool_grad_kernels(KernelRegistry& registry);
void register_cpu_global_average_pool_kernels(KernelRegistry& registry);  // global_average_pool.cc
// --- end losses and normalisation ---

}  // namespace onnxtrain
