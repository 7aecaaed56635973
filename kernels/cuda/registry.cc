// The one explicit table of CUDA kernel families.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kernel.h"

namespace onnxtrain {

void register_cuda_kernels(KernelRegistry& registry) {
  register_cuda_elementwise_kernels(registry);
  register_cuda_activation_grad_kernels(registry);
  register_cuda_dropout_kernels(registry);
  register_cuda_reduce_kernels(registry);
  register_cuda_softmax_kernels(registry);
  register_cuda_loss_kernels(registry);
  register_cuda_norm_kernels(registry);
  register_cuda_conv_kernels(registry);
  register_cuda_pooling_kernels(registry);
  register_cuda_batch_norm_kernels(registry);
  register_cuda_lrn_kernels(registry);
  register_cuda_gemm_kernels(registry);
  register_cuda_data_movement_kernels(registry);
  register_cuda_recurrent_kernels(registry);
}

}  // namespace onnxtrain
