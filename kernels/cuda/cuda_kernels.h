// Registration of the CUDA kernel families (implementation "cuda", DeviceKind::Cuda). One function per
// family, listed once in kernels/cuda/registry.cc; with CUDA compiled out the table is empty.
#pragma once

namespace onnxtrain {

class KernelRegistry;

void register_cuda_kernels(KernelRegistry& registry);

// --- families (kernels/cuda/*.cu) ---
void register_cuda_elementwise_kernels(
    KernelRegistry& registry);  // unary, binary with broadcasting, compare, logic, Where, Clip, Cast
void register_cuda_activation_grad_kernels(KernelRegistry& registry);
void register_cuda_dropout_kernels(KernelRegistry& registry);     // Dropout, DropoutGrad
void register_cuda_reduce_kernels(KernelRegistry& registry);      // Reduce*, ArgMax/ArgMin
void register_cuda_softmax_kernels(KernelRegistry& registry);     // Softmax, LogSoftmax and their grads
void register_cuda_loss_kernels(KernelRegistry& registry);        // SoftmaxCrossEntropyLoss, NLL and their grads
void register_cuda_norm_kernels(KernelRegistry& registry);        // LayerNormalization, InstanceNormalization (+grads)
void register_cuda_conv_kernels(KernelRegistry& registry);        // cuDNN Conv, ConvGrad, ConvTranspose
void register_cuda_pooling_kernels(KernelRegistry& registry);     // cuDNN pooling and grads
void register_cuda_batch_norm_kernels(KernelRegistry& registry);  // cuDNN BatchNormalization (+grad)
void register_cuda_lrn_kernels(KernelRegistry& registry);         // cuDNN LRN (+grad)
void register_cuda_gemm_kernels(KernelRegistry& registry);        // cuBLAS Gemm, MatMul
void register_cuda_data_movement_kernels(
    KernelRegistry& registry);  // shapes, copies, concat/split, slice, transpose, expand, gather, pad (+grads)
void register_cuda_recurrent_kernels(KernelRegistry& registry);  // RNN, GRU, LSTM, RecurrentGrad (cuBLAS)

}  // namespace onnxtrain
