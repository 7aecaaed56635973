// The one explicit table of "cpu" kernel families (onnxtrain's own vectorised CPU code).
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernel.h"

namespace onnxtrain {

void register_cpu_kernels(KernelRegistry& registry) {
  // --- elementwise ---
  register_cpu_elementwise_binary_kernels(registry);
  register_cpu_elementwise_compare_kernels(registry);
  register_cpu_elementwise_unary_kernels(registry);
  register_cpu_elementwise_dropout_kernels(registry);
  register_cpu_elementwise_activation_grad_kernels(registry);
  // --- end elementwise ---
  // --- reductions ---
  register_cpu_reduce_kernels(registry);
  register_cpu_arg_reduce_kernels(registry);
  // --- end reductions ---
  // --- data movement ---
  register_cpu_transpose_kernels(registry);
  register_cpu_concat_split_kernels(registry);
  register_cpu_slice_kernels(registry);
  register_cpu_gather_kernels(registry);
  register_cpu_expand_tile_kernels(registry);
  register_cpu_pad_kernels(registry);
  register_cpu_resize_kernels(registry);
  register_cpu_depth_space_kernels(registry);
  register_cpu_cast_kernels(registry);
  register_cpu_reshape_kernels(registry);
  // --- end data movement ---
  // --- losses and normalisation ---
  register_cpu_loss_kernels(registry);
  register_cpu_loss_grad_kernels(registry);
  register_cpu_instance_norm_kernels(registry);
  register_cpu_instance_norm_grad_kernels(registry);
  register_cpu_conv_transpose_kernels(registry);
  // --- end losses and normalisation ---
  // --- pooling ---
  register_cpu_max_pool_kernels(registry);
  register_cpu_max_pool_grad_kernels(registry);
  register_cpu_global_average_pool_kernels(registry);
  // --- end pooling ---
  (void)registry;
}

}  // namespace onnxtrain
